"""Accounting once per run: the batch log and the ledger get one INSERT each for every table `make run`
applied, after its dbt build, instead of two commits per table inside it (so a model node commits only its
own table; on the single-writer target its tombstones too are spooled to Parquet and inserted here, once).

Each batch says what to record in a line its materialization logs (macros/cdc/batch_log.sql:
`cdc_account`, when CDC_ACCOUNTING=run): its batch-log row and its ledger rows, each a list of literals (SQL
expressions that need no input). This dbtRunner callback collects them; `record` writes them as one VALUES
list per table (a union of a SELECT per row was a Spark task per row: 200 tables' batch-log rows 12 s against
3 s as VALUES), the batch log first (the tombstones at the same time), then the ledger (the order
the batch log's rule needs: a row never claims what did not happen; a table committed but not yet in the
ledger is applied again by the next run, which changes nothing and logs its changes as re-delivered).

A plain `dbt run` writes both at the end of each batch, as before.

The meta tables' upkeep follows the accounting: each batch writes a file to its model's partition of the
ledger and the batch log (and of the tombstones, if it had deletes), so `compact_meta` bin-packs a model's
partitions once per run, when one holds the model's `cdc_compaction.meta_files` files (its record says how
many); a plain `dbt run` does it after each batch (macros/cdc/maintenance.sql: cdc_compact_meta).
"""

from __future__ import annotations

import json
import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from python_hooks.project.meta import BATCH_LOG, FILE_LEDGER, TOMBSTONES
from python_hooks.project.sql import quoted_relation, sql_string
from python_hooks.project.warehouse import Warehouse

log = logging.getLogger(__name__)

ACCOUNTING_VARIABLE = "CDC_ACCOUNTING"  # "run": the macros leave the recording to `record`
ACCOUNTING_PREFIX = "cdc-accounting: "
# Where the batches of `make run` on the single-writer target write their tombstones, to be inserted once.
TOMBSTONE_SPOOL_VARIABLE = "CDC_TOMBSTONE_SPOOL"


class Accounting:
    """A dbtRunner callback: the batches' records, in the order their batches ended."""

    def __init__(self) -> None:
        self.records: list[dict] = []

    def __call__(self, event) -> None:
        if event.info.name not in ("JinjaLogInfo", "JinjaLogDebug"):
            return
        message = str(getattr(event.data, "msg", ""))
        if message.startswith(ACCOUNTING_PREFIX):
            try:
                self.records.append(json.loads(message[len(ACCOUNTING_PREFIX) :]))
            except ValueError:  # a callback that raises would fail the dbt run it observes
                log.exception("a batch's record could not be read")


def record(warehouse: Warehouse, records: list[dict]) -> int:
    """Writes the collected records: the tombstone and ledger rows of the models whose tables were
    created empty in this run are deleted (a first build, --full-refresh), then one INSERT into the batch log
    (each table's snapshot read first, from one listing of its schema) and, at the same time, the batches'
    tombstones (one INSERT, when any), then, once both have committed, one INSERT into the ledger. A run
    killed (or a statement failed) before the ledger's INSERT leaves those batches out of the ledger: the
    next run applies their files again, which changes nothing, records their tombstones again and logs
    their changes as re-delivered. Returns how many batches were recorded."""
    if not records:
        return 0
    meta = warehouse.meta_schema
    snapshots = _snapshots(warehouse, records)  # before any write: a failure leaves the meta tables as they are
    reset = sorted({r["model"] for r in records if r.get("reset")})
    if reset:  # tables created empty in this run (macros/cdc/materialization.sql): their rows start again
        models = ", ".join(sql_string(model) for model in reset)
        for table in (TOMBSTONES, FILE_LEDGER):
            warehouse.execute(
                f"delete from {quoted_relation(meta, table)} where model_name in ({models})", tables_changed=False
            )
    # macros/cdc/merge.sql: cdc_record_tombstones, rows of literals, and SELECTs of a folder this run spooled
    literal = [row for r in records for row in r.get("tombstone_rows") or []]
    tombstones = ([f"(select * from {_values(literal)})"] if literal else []) + [
        f"({sql})" for r in records for sql in r.get("tombstones") or []
    ]
    logged = _values([_with_snapshot(r, snapshots) for r in records])
    inserts = [f"insert into {quoted_relation(meta, BATCH_LOG)} {logged}"]
    if tombstones:
        inserts.append(f"insert into {quoted_relation(meta, TOMBSTONES)} {' union all '.join(tombstones)}")
    _at_once(warehouse, inserts)
    ledger = [row for r in records for row in r.get("ledger") or []]
    if ledger:
        warehouse.execute(f"insert into {quoted_relation(meta, FILE_LEDGER)} {_values(ledger)}", tables_changed=False)
    return len(records)


def _at_once(warehouse: Warehouse, statements: list[str]) -> None:
    """The statements at the same time, each from a thread of its own (the adapter gives a thread its own
    connection); returns once all have ended, raising the first failure. Two one-row INSERTs into two tables
    take 0.9 s together against 1.1 s one after the other (2 cores): most of an INSERT is its commit."""
    if len(statements) == 1:
        warehouse.execute(statements[0], tables_changed=False)
        return
    with ThreadPoolExecutor(max_workers=len(statements), thread_name_prefix="cdc-accounting") as pool:
        done = [pool.submit(warehouse.execute, sql, tables_changed=False) for sql in statements]
    for future in done:
        future.result()


def _values(rows: list[list[str]]) -> str:
    """Rows of literals as one VALUES list (macros/cdc/batch_log.sql: cdc_values_sql)."""
    return "values " + ", ".join("(" + ", ".join(row) + ")" for row in rows)


def _snapshots(warehouse: Warehouse, records: list[dict]) -> dict[tuple[str, str], str | None]:
    """(schema, model) -> the table's current snapshot now, after the build, for the records whose batch-log row
    leaves it to the run (macros/cdc/batch_log.sql: cdc_batch_log_row): one listing per schema
    (Warehouse.current_snapshots)."""
    by_schema: dict[str, list[str]] = {}
    for r in records:
        by_schema.setdefault(r["schema"], []).append(r["model"])
    return {
        (schema, model): snapshot
        for schema, models in by_schema.items()
        for model, snapshot in warehouse.current_snapshots(schema, sorted(set(models))).items()
    }


def _with_snapshot(record: dict, snapshots: dict[tuple[str, str], str | None]) -> list[str]:
    """A record's batch-log row, every column: its literals, then the table's snapshot_id (the table's last
    column, macros/cdc/meta.sql)."""
    snapshot = snapshots.get((record["schema"], record["model"]))
    value = "null" if snapshot is None else str(int(snapshot))
    return [*record["batch_log"], f"cast({value} as bigint)"]


# The meta tables a model's batches write a file to, partitioned by model_name (macros/cdc/meta.sql).
META_COMPACTED = (TOMBSTONES, FILE_LEDGER, BATCH_LOG)


def _meta_files(records: list[dict]) -> dict[str, int]:
    """Per model compacted by the run, the files of its partition that make a compaction due (its record's
    `meta_files`, from cdc_compaction)."""
    return {r["model"]: int(r["meta_files"]) for r in records if r.get("meta_files")}


LEDGER_SNAPSHOT = "ledger snapshot"  # the row of `after_record`'s query that is the ledger's newest snapshot


@dataclass(frozen=True)
class AfterRecord:
    """What one query after the record says: the recorded models' partitions of the meta tables as
    (table, model, files), and the ledger's newest snapshot with its parent (both ids as text), if asked."""

    partitions: list[tuple[str, str, int]]
    ledger: tuple[str, str] | None


def after_record(warehouse: Warehouse, records: list[dict], ledger_snapshot: bool) -> AfterRecord:
    """One query: the file count of each recorded model's partition of the meta tables (for the models
    compacted by the run, `compact_meta`) and, with `ledger_snapshot`, the ledger's newest snapshot and its
    parent (the hooks' ledger cache then follows the ledger's INSERT: landing/pending.py: note_recorded)."""
    thresholds = _meta_files(records)
    meta = warehouse.meta_schema
    parts = []
    if thresholds:
        models = ", ".join(sql_string(model) for model in sorted(thresholds))
        parts.extend(
            f"select {sql_string(table)}, partition.model_name, file_count"
            f" from {quoted_relation(meta, table)}.partitions where partition.model_name in ({models})"
            for table in META_COMPACTED
        )
    if ledger_snapshot:
        ledger = quoted_relation(meta, FILE_LEDGER)
        parts.append(
            f"select {sql_string(LEDGER_SNAPSHOT)}, cast(snapshots.parent_id as string), snapshots.snapshot_id"
            f" from {ledger}.snapshots as snapshots"
            f" where snapshots.snapshot_id = (select max(snapshot_id) from {ledger}.refs where name = 'main')"
        )
    if not parts:
        return AfterRecord([], None)
    partitions, ledger_row = [], None
    for first, second, third in warehouse.query(" union all ".join(parts)):
        if first == LEDGER_SNAPSHOT:
            ledger_row = (second, str(third)) if second is not None else None
        else:
            partitions.append((first, second, int(third)))
    return AfterRecord(partitions, ledger_row)


def ledger_files(records: list[dict]) -> dict[str, list[str]] | None:
    """The raw files each record added to the ledger (model -> names), or None when the run also deleted
    ledger rows (a table created empty in this run) or a record does not say."""
    if any(r.get("reset") for r in records):
        return None
    files = {}
    for r in records:
        if r.get("ledger"):
            if r.get("ledger_files") is None:
                return None
            files[r["model"]] = list(r["ledger_files"])
    return files


def compact_meta(
    warehouse: Warehouse, records: list[dict], partitions: list[tuple[str, str, int]]
) -> list[tuple[str, str]]:
    """Bin-packs the partitions of the recorded models that hold their `meta_files` files or more
    (`partitions`: from `after_record`), one rewrite per partition due (rows unchanged). Returns the
    (table, model) pairs compacted."""
    thresholds = _meta_files(records)
    meta = warehouse.meta_schema
    due = [(table, model) for table, model, files in partitions if model in thresholds and files >= thresholds[model]]
    for table, model in due:
        warehouse.execute(
            f"call spark_catalog.system.rewrite_data_files(table => {sql_string(f'{meta}.{table}')},"
            f" where => {sql_string(f'model_name = {sql_string(model)}')}, options => map('min-input-files', '2'))",
            tables_changed=False,
        )
    return due
