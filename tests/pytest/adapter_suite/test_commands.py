"""dbt-tests-adapter's classes for `dbt show`, `--empty`, seeds, unit tests and stored test failures on the local
target with the project's macros (the ones dbt-spark runs on its session profile, and the stored-failures ones it
skips there)."""

from __future__ import annotations

import pytest
from dbt.tests.adapter.dbt_show.test_dbt_show import BaseShowLimit
from dbt.tests.adapter.empty.test_empty import BaseTestEmpty, BaseTestEmptyInlineSourceRef, BaseTestEmptySeedFlag
from dbt.tests.adapter.simple_seed.test_seed import BaseTestEmptySeed
from dbt.tests.adapter.store_test_failures_tests import basic
from dbt.tests.adapter.unit_testing.test_case_insensitivity import BaseUnitTestCaseInsensivity
from dbt.tests.adapter.unit_testing.test_invalid_input import BaseUnitTestInvalidInput
from dbt.tests.adapter.unit_testing.test_types import BaseUnitTestingTypes

from helpers.adapter_suite import EMPTIED_FOLDERS_KEPT

# make test leaves this module out for its time (docs/models.md); make test-adapter runs it.
pytestmark = pytest.mark.adapter_suite_full


class TestShowLimit(BaseShowLimit):
    # Each case builds the class's project again: its non-Iceberg seed is dropped and created again from the second on.
    @pytest.mark.parametrize(
        "args,expected",
        [
            ([], 5),
            pytest.param(["--limit", 3], 3, marks=EMPTIED_FOLDERS_KEPT),
            pytest.param(["--limit", -1], 7, marks=EMPTIED_FOLDERS_KEPT),
        ],
    )
    def test_limit(self, project, args, expected):
        super().test_limit(project, args, expected)

    pass


class TestEmpty(BaseTestEmpty):
    pass


class TestEmptyInlineSourceRef(BaseTestEmptyInlineSourceRef):
    pass


@pytest.mark.skip(
    reason="`dbt seed --empty` is newer than the pinned dbt-core 1.11.16 (No such option '--empty'); "
    "dbt-tests-adapter 1.20 tests it: back when dbt-core is upgraded"
)
class TestEmptySeedFlag(BaseTestEmptySeedFlag):
    pass


class TestEmptySeed(BaseTestEmptySeed):
    pass


class TestUnitTestingTypes(BaseUnitTestingTypes):
    @pytest.fixture
    def data_types(self):
        # (the value in SQL, the same value in a unit test's yml), Spark's types
        return [
            ["1", "1"],
            ["2.0", "2.0"],
            ["'12345'", "12345"],
            ["'string'", "string"],
            ["true", "true"],
            ["date '2011-11-11'", "2011-11-11"],
            ["timestamp '2013-11-03 00:00:00'", "2013-11-03 00:00:00"],
            ["array(1, 2, 3)", "'array(1, 2, 3)'"],
        ]


class TestUnitTestCaseInsensitivity(BaseUnitTestCaseInsensivity):
    pass


class TestUnitTestInvalidInput(BaseUnitTestInvalidInput):
    pass


class TestStoreTestFailuresAsInteractions(basic.StoreTestFailuresAsInteractions):
    pass


class TestStoreTestFailuresAsProjectLevelOff(basic.StoreTestFailuresAsProjectLevelOff):
    pass


class TestStoreTestFailuresAsProjectLevelView(basic.StoreTestFailuresAsProjectLevelView):
    pass


class TestStoreTestFailuresAsGeneric(basic.StoreTestFailuresAsGeneric):
    pass


class TestStoreTestFailuresAsProjectLevelEphemeral(basic.StoreTestFailuresAsProjectLevelEphemeral):
    pass


class TestStoreTestFailuresAsExceptions(basic.StoreTestFailuresAsExceptions):
    pass
