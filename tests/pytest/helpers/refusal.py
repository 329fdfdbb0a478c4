"""What "a refused file changes nothing" means, checked four ways (issue 29, part 4): the table's rows,
its columns (names and types), its Iceberg snapshots, its ledger rows and its batch log rows. A run that
refuses a table may only add a 'refused' row to its batch log, counting nothing as applied."""

from __future__ import annotations

from dataclasses import dataclass

from helpers.runs import batch_log
from helpers.tables import snapshot_ids


@dataclass(frozen=True)
class TableState:
    rows: list
    columns: list[tuple[str, str]]
    snapshots: list[int]
    ledger: list[tuple]
    batch_log: list[dict]


def table_state(spark, schema: str, model: str, relation: str) -> TableState:
    """Everything a refused batch must leave as it was, for current-state model `model` at `relation`."""
    table = spark.table(relation)
    rows = sorted(tuple(str(v) for v in row) for row in table.collect())
    snapshots = snapshot_ids(spark, relation)
    ledger = sorted(
        tuple(row)
        for row in spark.sql(
            f"select file_name from {schema}_cdc_meta.cdc_file_ledger where model_name = '{model}'"
        ).collect()
    )
    return TableState(rows, list(table.dtypes), snapshots, ledger, batch_log(spark, schema).get(model, []))


def assert_changed_nothing(before: TableState, after: TableState, label: str) -> None:
    """Rows, columns, snapshots and ledger as they were; the batch log as it was but for 'refused' rows."""
    assert after.rows == before.rows, f"{label}: the refused table's rows changed"
    assert after.columns == before.columns, f"{label}: the refused table's columns changed: {after.columns}"
    assert after.snapshots == before.snapshots, f"{label}: the refused table got a new snapshot"
    new = sorted(set(after.ledger) - set(before.ledger))
    assert after.ledger == before.ledger, f"{label}: the ledger changed: {new}"
    assert after.batch_log[: len(before.batch_log)] == before.batch_log, f"{label}: earlier batch log rows changed"
    for row in after.batch_log[len(before.batch_log) :]:
        assert row["status"] == "refused", f"{label}: the batch log has a new row that is not a refusal: {row}"
        counts = (row["rows_inserted"], row["rows_updated"], row["rows_deleted"])
        assert counts == (0, 0, 0), f"{label}: a refused batch log row counts changes: {row}"
