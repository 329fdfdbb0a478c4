"""`python -m python_hooks live compare`: every live current-state table against its PostgreSQL table
(python_hooks/live/compare.py), one line per table; exit status 1 on a difference. Run it after the
workload has stopped, `live drain` and a run (`CDC_LIVE=1 python -m python_hooks run`)."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

import psycopg

from python_hooks.live.compare import TableComparison, compare_table
from python_hooks.live.config import SCHEMA, TABLES, LiveConfig
from python_hooks.project.session import Session, SessionError
from python_hooks.project.tables import cdc_tables

log = logging.getLogger("python_hooks.live")

LIVE_MODELS = "CDC_LIVE"  # dbt_project.yml builds the live source's models only when it is 1


def compare_live(config: LiveConfig, dbt_args: Sequence[str], session: Session | None = None) -> list[TableComparison]:
    """One comparison per live table; a table without a current-state model is a difference too.
    `session`: the caller's (a test's, in its process), parsed with the live models enabled."""
    os.environ[LIVE_MODELS] = "1"
    own = session is None
    try:
        session = session or Session.start(dbt_args)
    except SessionError as error:
        raise SystemExit(str(error)) from error
    try:
        models = {t.table_name: t for t in cdc_tables(session.manifest) if t.source_name == SCHEMA}
        results = []
        with psycopg.connect(config.conninfo()) as connection:
            for table in TABLES:
                model = models.get(table.name)
                if model is None:
                    missing = TableComparison(table.name, "?")
                    missing.differences.append(f"no current-state model reads source {SCHEMA}.{table.name}")
                    results.append(missing)
                    continue
                results.append(compare_table(connection, session.warehouse, table, model.schema, model.identifier))
        return results
    finally:
        if own:
            session.close()


def run_compare(config: LiveConfig, dbt_args: Sequence[str]) -> bool:
    """The comparison's lines (logged); True when every table is equal."""
    results = compare_live(config, dbt_args)
    for result in results:
        (log.info if result.equal else log.error)("live compare: %s", result.line())
    return all(result.equal for result in results)
