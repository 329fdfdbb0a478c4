"""The run's accounting (commands/accounting.py: record): the batch log's and the tombstones' INSERTs run at
the same time, and the ledger's only once both have committed, so that a run that dies or fails before the
ledger's INSERT leaves its batches out of the ledger (the next run applies them again, which changes nothing).
A stand-in warehouse records the statements; a barrier that both INSERTs must reach proves they overlap."""

from __future__ import annotations

import threading

import pytest

from python_hooks.commands.accounting import record


class Recorder:
    """What record() asks of a warehouse: its meta schema, each table's snapshot, and statements to run."""

    meta_schema = "s_cdc_meta"

    def __init__(self, fail_on: str | None = None) -> None:
        self.fail_on = fail_on
        self.together = threading.Barrier(2, timeout=10)
        self.lock = threading.Lock()
        self.ended: list[str] = []

    def current_snapshots(self, schema: str, models: list[str]) -> dict[str, str | None]:
        return dict.fromkeys(models, "42")

    def execute(self, sql: str, *, tables_changed: bool = True) -> None:
        table = sql.split("`")[3]  # insert into `s_cdc_meta`.`<table>` ...
        if table in ("cdc_batch_log", "cdc_tombstones"):
            self.together.wait()  # the other INSERT must be running too
        if table == self.fail_on:
            raise RuntimeError(f"{table} failed")
        with self.lock:
            self.ended.append(table)


RECORDS = [
    {
        "schema": "s_current",
        "model": "m",
        "batch_log": ["'b1'", "'m'"],
        "ledger": [["'m'", "'f1.parquet'"]],
        "tombstone_rows": [["'m'", "'{\"id\":1}'"]],
    }
]


def test_the_ledger_commits_after_the_batch_log_and_the_tombstones_which_run_together():
    warehouse = Recorder()
    assert record(warehouse, RECORDS) == 1
    assert sorted(warehouse.ended[:2]) == ["cdc_batch_log", "cdc_tombstones"]
    assert warehouse.ended[2:] == ["cdc_file_ledger"]


@pytest.mark.parametrize("failing", ["cdc_tombstones", "cdc_batch_log"])
def test_a_failed_insert_leaves_the_ledger_alone(failing):
    warehouse = Recorder(fail_on=failing)
    with pytest.raises(RuntimeError, match=f"{failing} failed"):
        record(warehouse, RECORDS)
    assert "cdc_file_ledger" not in warehouse.ended


def test_without_tombstones_the_batch_log_then_the_ledger():
    warehouse = Recorder()
    warehouse.together = threading.Barrier(1)  # alone: nothing to wait for
    records = [{**RECORDS[0], "tombstone_rows": []}]
    assert record(warehouse, records) == 1
    assert warehouse.ended == ["cdc_batch_log", "cdc_file_ledger"]
