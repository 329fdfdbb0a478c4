"""The pipeline on the live source, with PostgreSQL itself as the oracle (issue 28): a real PostgreSQL 15
captured by Debezium (both shapes: customer and document flattened, order_line the envelope), a short
workload (a key changed several times in one transaction, a TRUNCATE, columns added, a type widened,
TOASTed bodies updated without being touched), the capture drained, then the pipeline in this process
(`make run` with CDC_LIVE=1: hooks and `dbt build` of the live models) twice, once after the initial
snapshot and once after the workload, so that the second run merges into existing tables (a snapshot
document's body, TOASTed, left alone by an update in between: its placeholder meets the table's value). Then
`live compare` (python_hooks/live/compare.py) must find every table equal to PostgreSQL: same keys,
mapped types, every value."""

from __future__ import annotations

import os

import psycopg
import pytest

from helpers.live import Live
from oracles.replay_debezium_real import UNAVAILABLE, read_events
from python_hooks.commands.live_compare import LIVE_MODELS, compare_live
from python_hooks.live.config import TABLES
from python_hooks.project.session import Session

pytestmark = pytest.mark.live_capture

DOCUMENT = next(table for table in TABLES if table.name == "document")
ORDER_LINE = next(table for table in TABLES if table.name == "order_line")


@pytest.fixture
def live_models():
    """The live source's models enabled (dbt_project.yml) for this test's dbt invocations only."""
    before = os.environ.get(LIVE_MODELS)
    os.environ[LIVE_MODELS] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(LIVE_MODELS, None)
        else:
            os.environ[LIVE_MODELS] = before


def _compare(dbt, live: Live, schema: str) -> list:
    common = [*dbt._common(live.config.landing_root, schema), "--target", "local"]
    with Session.start(common, runner=dbt._runner) as session:
        return compare_live(live.config, common, session=session)


def test_every_live_table_equals_postgresql_after_the_pipeline(dbt, spark, live: Live, live_models, schema):
    landing = live.config.landing_root
    live.cli("workload", "--only-seed")
    live.start_capture()
    live.cli("drain")
    assert dbt.pipeline(
        "--select", "source:shop+", landing=landing, schema=schema
    )  # the initial snapshot: tables created
    first = _compare(dbt, live, schema)
    assert [r.line() for r in first if not r.equal] == []

    # A TOASTed body the table already holds, left alone by an update: the MERGE must keep it.
    with psycopg.connect(live.config.conninfo(), autocommit=True) as connection:
        connection.execute("update shop.document set revision = revision + 100 where document_id = 1")
    live.cli("workload", "--rounds", "5")
    live.cli("drain")
    assert dbt.pipeline("--select", "source:shop+", landing=landing, schema=schema)  # merged into the tables
    results = _compare(dbt, live, schema)
    assert [r.line() for r in results if not r.equal] == []
    assert {r.table for r in results} == {"customer", "order_line", "document"}
    assert all(r.source_rows == r.lake_rows > 0 for r in results)

    # What the comparison covered is in the files: a truncate in the envelope, a placeholder in a flat topic.
    lines = [e["record"] for e in read_events(live.topic_dir(ORDER_LINE))]
    documents = [e["record"] for e in read_events(live.topic_dir(DOCUMENT))]
    assert any(r["op"] == "t" for r in lines)
    assert any(r["body"] == UNAVAILABLE and r["__op"] == "u" and r["document_id"] == 1 for r in documents)
