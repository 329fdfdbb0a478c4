"""dbt-tests-adapter's basic classes (what every adapter runs), on the local target with the project's macros.

dbt-spark 1.11 skips some of them on its session profile (SimpleMaterializations, Ephemeral, Incremental,
AdapterMethod, the two snapshots for want of Delta): they run here. Snapshots need a table format with MERGE:
Iceberg, as the project's own snapshots (dbt_project.yml)."""

from __future__ import annotations

import pytest
from dbt.tests.adapter.basic.test_adapter_methods import BaseAdapterMethod
from dbt.tests.adapter.basic.test_base import BaseSimpleMaterializations
from dbt.tests.adapter.basic.test_empty import BaseEmpty
from dbt.tests.adapter.basic.test_ephemeral import BaseEphemeral
from dbt.tests.adapter.basic.test_generic_tests import BaseGenericTests
from dbt.tests.adapter.basic.test_incremental import BaseIncremental
from dbt.tests.adapter.basic.test_singular_tests import BaseSingularTests
from dbt.tests.adapter.basic.test_singular_tests_ephemeral import BaseSingularTestsEphemeral
from dbt.tests.adapter.basic.test_snapshot_check_cols import BaseSnapshotCheckCols
from dbt.tests.adapter.basic.test_snapshot_timestamp import BaseSnapshotTimestamp

from helpers.adapter_suite import EMPTIED_FOLDERS_KEPT

ICEBERG_SNAPSHOTS = {"seeds": {"+file_format": "iceberg"}, "snapshots": {"+file_format": "iceberg"}}


class TestSimpleMaterializations(BaseSimpleMaterializations):
    @EMPTIED_FOLDERS_KEPT
    def test_base(self, project):
        super().test_base(project)


class TestSingularTests(BaseSingularTests):
    pass


class TestSingularTestsEphemeral(BaseSingularTestsEphemeral):
    pass


class TestEmpty(BaseEmpty):
    pass


class TestEphemeral(BaseEphemeral):
    pass


class TestIncremental(BaseIncremental):
    pass


class TestGenericTests(BaseGenericTests):
    pass


@pytest.mark.adapter_suite_full  # make test runs test_simple_snapshot.py's classes (the same strategies)
class TestSnapshotCheckCols(BaseSnapshotCheckCols):
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return ICEBERG_SNAPSHOTS


@pytest.mark.adapter_suite_full  # make test runs test_simple_snapshot.py's classes (the same strategies)
class TestSnapshotTimestamp(BaseSnapshotTimestamp):
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return ICEBERG_SNAPSHOTS


class TestAdapterMethod(BaseAdapterMethod):
    pass
