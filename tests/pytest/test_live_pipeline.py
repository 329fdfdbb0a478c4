"""The pipeline on the live source, with PostgreSQL itself as the oracle (issue 28): a real PostgreSQL 15
captured by Debezium (both shapes: customer and document flattened, order_line the envelope), a short
workload (a key changed several times in one transaction, a TRUNCATE, columns added, a type widened,
TOASTed bodies updated without being touched), the capture drained, then the pipeline in this process
(`make run` with CDC_LIVE=1: hooks and `dbt build` of the live models) twice, once after the initial
snapshot and once after the workload, so that the second run merges into existing tables (a snapshot
document's body, TOASTed, left alone by an update in between: its placeholder meets the table's value). Then
`live compare` (python_hooks/live/compare.py) must find every table equal to PostgreSQL: same keys,
mapped types, every value. In the second run, a table's batch fills the placeholder (macros/cdc/unchanged.sql)
only when one of its new files holds it, as the files themselves say: the hooks read every file first.

And the history: each run also takes one dbt snapshot of the live `customer` table
(`shop_customer_snapshot`), so it must hold one version per committed change a run saw. After each run
the test records `shop__customer` as the run left it; at the end every customer's versions, in
`dbt_valid_from` order, must be the distinct states (its columns and `_cdc_ts`) of the recordings, in run
order. The snapshot takes `hard_deletes: new_record`, as the project's `customer_snapshot`: a customer a
later run no longer holds has, after its last live version, a deletion version (`dbt_is_deleted` = 'True')
with the last version's columns, starting at the delete's commit time (read here from the topic's
Debezium events: the key's last delete), which also ends the version before it; each version ends where
the next starts, the last at 9999-12-31. Compared as whole tables of (customer_id, version number) ->
columns (`expected_versions`, pure Python)."""

from __future__ import annotations

import datetime as dt
import os

import psycopg
import pyarrow.parquet as pq
import pytest

from bench.instrument import SqlProfile
from helpers.live import Live
from helpers.tables import assert_same_table
from oracles.replay_debezium_real import UNAVAILABLE, read_events
from python_hooks.commands.live_compare import LIVE_MODELS, compare_live, compare_live_snapshots
from python_hooks.live.config import TABLES
from python_hooks.project.session import Session

pytestmark = pytest.mark.live_capture

CUSTOMER = next(table for table in TABLES if table.name == "customer")
DOCUMENT = next(table for table in TABLES if table.name == "document")
ORDER_LINE = next(table for table in TABLES if table.name == "order_line")
SNAPSHOT = "shop_customer_snapshot"  # snapshots/shop/
CURRENT = "9999-12-31 00:00:00"  # the snapshot's dbt_valid_to_current


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


def _raw_files(live: Live, table) -> set:
    return set(live.topic_dir(table).rglob("*.parquet"))


def _holds_placeholder(path) -> bool:
    """The placeholder among a raw file's values, at any depth (an envelope's `after`, an array)."""
    return UNAVAILABLE in repr(pq.read_table(path).to_pylist())


def _compare(dbt, live: Live, schema: str) -> tuple[list, list]:
    """`live compare`'s results: the tables', the snapshots'."""
    common = [*dbt._common(live.config.landing_root, schema), "--target", "local"]
    with Session.start(common, runner=dbt._runner) as session:
        return compare_live(live.config, common, session=session), compare_live_snapshots(session, live.config)


_TWO_DOCUMENTS = "select document_id from shop.document order by document_id limit 2"
_REVISE = "update shop.document set revision = revision + 1 where document_id = %s"


def _node_sql(profile: SqlProfile, table) -> list[str]:
    """The statements the current-state node of a live table (`TABLES`) sent."""
    return [s.sql for s in profile.statements if s.node.endswith(f".shop__{table.name}")]


def _plain(value):
    """A value as it compares across runs: an array as a tuple."""
    return tuple(value) if isinstance(value, list) else value


def _recording(spark, schema: str) -> dict[int, dict]:
    """`shop__customer` as a run left it: customer_id -> {column: value}."""
    rows = spark.table(f"{schema}_current.shop__customer").collect()
    return {row["customer_id"]: {name: _plain(value) for name, value in row.asDict().items()} for row in rows}


def _removals(events: list[dict]) -> dict[int, dt.datetime]:
    """customer_id -> the commit time (`__source_ts_ms`, as staging's `_cdc_ts`) of its last delete."""
    deletes = sorted((e["record"] for e in events if e["record"]["__op"] == "d"), key=lambda r: r["__source_lsn"])
    return {r["customer_id"]: dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=r["__source_ts_ms"]) for r in deletes}


def expected_versions(
    recordings: list[dict[int, dict]], attributes: list[str], removals: dict[int, dt.datetime]
) -> dict[tuple, dict]:
    """(customer_id, version number from 1) -> the version's columns, replayed from the runs' recordings."""
    histories: dict[int, list[dict]] = {}
    for recording in recordings:
        for key, row in recording.items():
            state = {**{a: row.get(a) for a in attributes}, "updated_at": row["_cdc_ts"], "dbt_is_deleted": "False"}
            history = histories.setdefault(key, [])
            if not history or history[-1] != state:
                history.append(state)
        for key, history in histories.items():
            if key not in recording and history[-1]["dbt_is_deleted"] == "False":
                history.append({**history[-1], "updated_at": removals[key], "dbt_is_deleted": "True"})
    current = dt.datetime.fromisoformat(CURRENT)
    expected = {}
    for key, history in histories.items():
        for number, state in enumerate(history, start=1):
            valid_to = history[number]["updated_at"] if number < len(history) else current
            expected[(key, number)] = {**state, "dbt_valid_from": state["updated_at"], "dbt_valid_to": valid_to}
    return expected


def _versions(spark, schema: str, columns: list[str]) -> dict[tuple, dict]:
    """The snapshot's rows: (customer_id, version number in dbt_valid_from order) -> columns."""
    rows = spark.table(f"{schema}_snapshots.{SNAPSHOT}").collect()
    versions: dict[tuple, dict] = {}
    counts: dict[int, int] = {}
    for row in sorted(rows, key=lambda r: (r["customer_id"], r["dbt_valid_from"])):
        counts[row["customer_id"]] = counts.get(row["customer_id"], 0) + 1
        versions[(row["customer_id"], counts[row["customer_id"]])] = {c: _plain(row[c]) for c in columns}
    return versions


def test_every_live_table_equals_postgresql_after_the_pipeline(dbt, spark, live: Live, live_models, schema):
    landing = live.config.landing_root
    live.cli("workload", "--only-seed")
    live.start_capture()
    live.cli("drain")
    assert dbt.pipeline(
        "--select", "source:shop+", landing=landing, schema=schema
    )  # the initial snapshot: tables created
    recordings = [_recording(spark, schema)]
    first, _ = _compare(dbt, live, schema)
    assert [r.line() for r in first if not r.equal] == []

    # A TOASTed body the table already holds, left alone by an update: the MERGE must keep it.
    applied = {table.name: _raw_files(live, table) for table in TABLES}
    # A TOASTed body under a changed key: Debezium deletes the old key and creates the new one at one position,
    # the body as the placeholder, which only the old key's row holds (the fill's rule 2).
    with psycopg.connect(live.config.conninfo(), autocommit=True) as connection:
        connection.execute("update shop.document set revision = revision + 100 where document_id = 1")
        connection.execute("update shop.document set document_id = 1000 + document_id where document_id = 3")
    live.cli("workload", "--rounds", "5")
    live.cli("drain")
    profile = SqlProfile()
    dbt._runner.callbacks.append(profile)
    try:
        assert dbt.pipeline("--select", "source:shop+", landing=landing, schema=schema)  # merged into the tables
    finally:
        dbt._runner.callbacks.remove(profile)
    # A batch fills the placeholder (its windows, the stored rows joined) only when one of its files holds it.
    holds = {
        table.name: any(_holds_placeholder(path) for path in _raw_files(live, table) - applied[table.name])
        for table in TABLES
    }
    fills = {
        table.name: any(
            "_cdc_fill_segment" in s.sql for s in profile.statements if s.node.endswith(f".shop__{table.name}")
        )
        for table in TABLES
    }
    assert fills == holds, (fills, holds)
    assert set(holds.values()) == {True, False}, holds  # both kinds of batch ran
    # The key change: that batch fills by every rule, in two rounds.
    assert any("_cdc_fill_departed" in sql for sql in _node_sql(profile, DOCUMENT))
    recordings.append(_recording(spark, schema))
    results, snapshots = _compare(dbt, live, schema)
    assert [r.line() for r in results if not r.equal] == []
    assert {r.table for r in results} == {"customer", "order_line", "document"}
    assert all(r.source_rows == r.lake_rows > 0 for r in results)

    # A batch with the placeholder whose delete cannot change what the fill finds (another key, after its
    # updates), as the hooks find reading its files, fills in one round, without the rules that follow a
    # delete: a body left alone by two updates (the table's value), and one replaced, then left alone (the
    # batch's earlier value).
    with psycopg.connect(live.config.conninfo(), autocommit=True) as connection:
        kept, replaced = (row[0] for row in connection.execute(_TWO_DOCUMENTS))
        with connection.transaction():
            for document_id in (kept, kept):
                connection.execute(_REVISE, (document_id,))
            connection.execute("update shop.document set body = %s where document_id = %s", ("z" * 7000, replaced))
            connection.execute(_REVISE, (replaced,))
        connection.execute("delete from shop.document where document_id = (select max(document_id) from shop.document)")
    live.cli("drain")
    profile = SqlProfile()
    dbt._runner.callbacks.append(profile)
    try:
        assert dbt.pipeline("--select", "source:shop+", landing=landing, schema=schema)
    finally:
        dbt._runner.callbacks.remove(profile)
    filled = _node_sql(profile, DOCUMENT)
    assert any("_cdc_fill_segment" in sql for sql in filled), "the batch holds the placeholder: it fills"
    assert not any("_cdc_fill_departed" in sql for sql in filled), "its delete changes nothing: one round"
    recordings.append(_recording(spark, schema))
    results, _ = _compare(dbt, live, schema)
    assert [r.line() for r in results if not r.equal] == []

    # What the comparison covered is in the files: a truncate in the envelope, a placeholder in a flat topic.
    lines = [e["record"] for e in read_events(live.topic_dir(ORDER_LINE))]
    documents = [e["record"] for e in read_events(live.topic_dir(DOCUMENT))]
    assert any(r["op"] == "t" for r in lines)
    assert any(r["body"] == UNAVAILABLE and r["__op"] == "u" and r["document_id"] == 1 for r in documents)

    # The snapshot: one version per distinct state the runs left, a deletion version per customer removed.
    attributes = [c for c in next(iter(recordings[-1].values())) if not c.startswith("_cdc_")]
    compared = [*attributes, "updated_at", "dbt_is_deleted", "dbt_valid_from", "dbt_valid_to"]
    expected = expected_versions(recordings, attributes, _removals(read_events(live.topic_dir(CUSTOMER))))
    assert_same_table(_versions(spark, schema, compared), expected, SNAPSHOT)
    # `live compare`'s line for it: the same figures, the latest versions equal to the table
    assert [(s.snapshot, s.versions, s.keys, s.equal) for s in snapshots] == [
        (SNAPSHOT, len(expected), len({key for key, _ in expected}), True)
    ], [s.line() for s in snapshots]
    # what the comparison covered: customers changed and removed between the runs, one added by the second
    assert any(number == 2 and v["dbt_is_deleted"] == "False" for (_, number), v in expected.items())
    assert any(v["dbt_is_deleted"] == "True" for v in expected.values())
    assert set(recordings[1]) - set(recordings[0])
