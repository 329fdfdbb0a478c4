"""Accounting once per run: the batch log and the ledger get one INSERT each for every table `make run`
applied, after its dbt build, instead of two commits per table inside it (so a model node commits only its
own table, and its tombstones).

Each batch says what to record in a line its materialization logs (macros/cdc/batch_log.sql:
`cdc_account`, when CDC_ACCOUNTING=run): its batch-log row and its ledger rows, as SELECTs of literals. This
dbtRunner callback collects them; `record` writes them, the batch log first, then the ledger (the order
the batch log's rule needs: a row never claims what did not happen; a table committed but not yet in the
ledger is applied again by the next run, which changes nothing and logs its changes as re-delivered).

A plain `dbt run` writes both at the end of each batch, as before.
"""

from __future__ import annotations

import json
import logging

from python_hooks.project.meta import BATCH_LOG, FILE_LEDGER
from python_hooks.project.sql import quoted_relation
from python_hooks.project.warehouse import Warehouse

log = logging.getLogger(__name__)

ACCOUNTING_VARIABLE = "CDC_ACCOUNTING"  # "run": the macros leave the recording to `record`
ACCOUNTING_PREFIX = "cdc-accounting: "


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
    """Writes the collected records: one INSERT into the batch log, then one into the ledger. Returns
    how many batches were recorded."""
    if not records:
        return 0
    meta = warehouse.meta_schema
    rows = " union all ".join(f"({r['batch_log']})" for r in records)
    warehouse.execute(f"insert into {quoted_relation(meta, BATCH_LOG)} {rows}")
    ledger = [r["ledger"] for r in records if r.get("ledger")]
    if ledger:
        rows = " union all ".join(f"({sql})" for sql in ledger)
        warehouse.execute(f"insert into {quoted_relation(meta, FILE_LEDGER)} {rows}")
    return len(records)
