"""dbt-tests-adapter's `simple_snapshot` classes (an analyst's snapshot of a table the analyst changes by hand)
with the project's macros loaded (macros/snapshot/snapshot.sql overrides dbt-spark's materialization).

Adapted as dbt-spark adapts the suite's classes for a table format with UPDATE and DELETE: the suite makes its
`fact` table with a plain `create table ... as select`, which on Spark's session catalog is a Hive text table
(no UPDATE); here it is an Iceberg table, as the seed, the model and the snapshot are. A column added by hand
is added without `default null` (Iceberg's ALTER takes no default; a new column reads as null anyway).

What this holds: the snapshot's first run after its table was emptied and `fact` made again meets a staging
relation whose `dbt_updated_at` is a timestamp while the snapshot's column is a date (the seed's
`updated_at`); that is no widening Iceberg allows, so the snapshot keeps its type and works, as dbt-spark's
own materialization does (the regression of 2026-11-26: the override altered it and Spark refused)."""

from __future__ import annotations

import pytest
from dbt.tests.adapter.simple_snapshot.test_snapshot import BaseSimpleSnapshot, BaseSnapshotCheck
from dbt.tests.util import relation_from_name

ICEBERG = {
    "models": {"+file_format": "iceberg"},
    "seeds": {"+file_format": "iceberg"},
    "snapshots": {"+file_format": "iceberg"},
}


class _IcebergFact:
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return ICEBERG

    def create_fact_from_seed(self, where: str | None = None):
        fact = relation_from_name(self.project.adapter, "fact")
        seed = relation_from_name(self.project.adapter, "seed")
        self.project.run_sql(f"drop table if exists {fact}")
        self.project.run_sql(f"create table {fact} using iceberg as select * from {seed} where {where or '1 = 1'}")

    def add_fact_column(self, column: str | None = None, definition: str | None = None):
        definition = (definition or "").lower().replace("default null", "").strip()
        super().add_fact_column(column, definition)


class TestSimpleSnapshot(_IcebergFact, BaseSimpleSnapshot):
    pass


class TestSnapshotCheck(_IcebergFact, BaseSnapshotCheck):
    pass
