"""Accounting once per run: the batch log and the ledger get one INSERT each for every table `make run`
applied, after its dbt build, instead of two commits per table inside it (so a model node commits only its
own table; on the single-writer target its tombstones too are spooled to Parquet and inserted here, once).

Each batch says what to record in a line its materialization logs (macros/cdc/batch_log.sql:
`cdc_account`, when CDC_ACCOUNTING=run): its batch-log row and its ledger rows, as SELECTs of literals. This
dbtRunner callback collects them; `record` writes them, the batch log first, then the ledger (the order
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
    created empty in this run are deleted (a first build, --full-refresh), then the batches' tombstones
    (one INSERT, when any), one INSERT into the batch log, then one into the ledger. A run killed between
    the deletes and the ledger's INSERT leaves those models without ledger rows: the next run applies
    all their files again, which changes nothing. Returns how many batches were recorded."""
    if not records:
        return 0
    meta = warehouse.meta_schema
    reset = sorted({r["model"] for r in records if r.get("reset")})
    if reset:  # tables created empty in this run (macros/cdc/materialization.sql): their rows start again
        models = ", ".join(sql_string(model) for model in reset)
        for table in (TOMBSTONES, FILE_LEDGER):
            warehouse.execute(
                f"delete from {quoted_relation(meta, table)} where model_name in ({models})", tables_changed=False
            )
    # macros/cdc/merge.sql: cdc_record_tombstones, SELECTs of literal rows or of a folder this run spooled
    tombstones = [sql for r in records for sql in r.get("tombstones") or []]
    if tombstones:
        rows = " union all ".join(f"({sql})" for sql in tombstones)
        warehouse.execute(f"insert into {quoted_relation(meta, TOMBSTONES)} {rows}", tables_changed=False)
    rows = " union all ".join(f"({r['batch_log']})" for r in records)
    warehouse.execute(f"insert into {quoted_relation(meta, BATCH_LOG)} {rows}", tables_changed=False)
    ledger = [r["ledger"] for r in records if r.get("ledger")]
    if ledger:
        rows = " union all ".join(f"({sql})" for sql in ledger)
        warehouse.execute(f"insert into {quoted_relation(meta, FILE_LEDGER)} {rows}", tables_changed=False)
    return len(records)


# The meta tables a model's batches write a file to, partitioned by model_name (macros/cdc/meta.sql).
META_COMPACTED = (TOMBSTONES, FILE_LEDGER, BATCH_LOG)


def compact_meta(warehouse: Warehouse, records: list[dict]) -> list[tuple[str, str]]:
    """Bin-packs the partitions of the recorded models that hold their `meta_files` files or more: one
    query over the three tables' partitions, then one rewrite per partition due (rows unchanged). Returns
    the (table, model) pairs compacted."""
    thresholds = {r["model"]: int(r["meta_files"]) for r in records if r.get("meta_files")}
    if not thresholds:
        return []
    meta = warehouse.meta_schema
    models = ", ".join(sql_string(model) for model in sorted(thresholds))
    counts = " union all ".join(
        f"select {sql_string(table)}, partition.model_name, file_count"
        f" from {quoted_relation(meta, table)}.partitions where partition.model_name in ({models})"
        for table in META_COMPACTED
    )
    due = [(table, model) for table, model, files in warehouse.query(counts) if files >= thresholds[model]]
    for table, model in due:
        warehouse.execute(
            f"call spark_catalog.system.rewrite_data_files(table => {sql_string(f'{meta}.{table}')},"
            f" where => {sql_string(f'model_name = {sql_string(model)}')}, options => map('min-input-files', '2'))",
            tables_changed=False,
        )
    return due
