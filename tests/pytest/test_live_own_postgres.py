"""The capture pointed at a PostgreSQL database it did not create, given only by configuration (issue 41),
and the pipeline on what Debezium wrote from it, compared whole with PostgreSQL.

The test makes its own database `ledger` with plain psql (schema `acct`, not the demo's `shop`), names it
in a CDC_LIVE_CONFIG file as an external server (host, port, database, user; the private server of the
`live` fixture only stands in for it), with its two tables:

- `acct.entry`: a composite key of a text (hostile strings) and an integer; a TOASTed text `memo`, jsonb
  `attrs` and text[] `labels` (STORAGE EXTERNAL, so every value above about 2 kB is out of line) under
  REPLICA IDENTITY DEFAULT; flattened topic, two Kafka partitions;
- `acct.account`: a text key, a TOASTed `notes`; the full envelope, truncated and reloaded.

The workload (WORKLOAD_1 and WORKLOAD_2, two batches) meets every case of the issue: updates that leave
the TOASTed text, jsonb and array alone (Debezium sends `__debezium_unavailable_value`, for the array as
a one-element array), primary-key changes of TOASTed rows (a delete and a create at one LSN, perhaps in
two partitions) within a batch and across batches, a key changed twice in one batch, a key deleted and
then a key changed into it (the delete's filler NULLs must not become the row's values), a truncate and
reload on the envelope topic.

- `test_the_capture_follows_its_configuration`: no Spark. What landed, replayed by the independent
  oracle (oracles/replay_debezium_real.py), equals PostgreSQL row for row.
- `test_the_pipeline_on_an_own_postgresql_equals_it`: add-source makes both tables from their footers
  (the PostgreSQL connector recognised: `cdc_unchanged_value` written; the flattened table named
  "truncates not seen"), then two runs of the pipeline, each followed by `live compare`, which must find
  both tables equal to PostgreSQL.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from psycopg.rows import dict_row

from helpers.live import Live
from helpers.paths import PROJECT
from oracles.replay_debezium_real import UNAVAILABLE, read_events, replay
from python_hooks.commands.live_compare import compare_live
from python_hooks.live.config import config_from_env
from python_hooks.project import postgres
from python_hooks.project.session import Session

pytestmark = pytest.mark.live_capture

DATABASE = "ledger"
BOOKS = ['O\'Brien "main" book', "ünï;code -- ", "tab\tbook, a/b"]  # text keys that break naive quoting

SCHEMA_SQL = """
create schema acct;
create table acct.entry (
    book text not null,
    entry_no integer not null,
    amount numeric(14, 4) not null,
    memo text,
    attrs jsonb,
    labels text[],
    primary key (book, entry_no)
);
alter table acct.entry alter column memo set storage external;
alter table acct.entry alter column attrs set storage external;
alter table acct.entry alter column labels set storage external;
create table acct.account (
    code text primary key,
    name text not null,
    notes text
);
alter table acct.account alter column notes set storage external;
"""


def _memo(book: str, n: int, version: int) -> str:
    return f"{book} #{n} v{version}: " + "".join(f"{i:05d} " for i in range(1000))  # 6 kB: out of line


def _attrs(book: str, n: int) -> str:
    return psycopg.types.json.Jsonb({"book": book, "n": n, "blob": "x" * 3000, "list": [1, None, "two"]})


def _labels(book: str, n: int) -> list[str | None]:
    return [f"{book}-{n}-{i:04d}" for i in range(250)] + [None]


def _entry(book: str, n: int) -> tuple:
    """Most rows with TOASTed values; every fourth with short ones, every fifth with NULLs."""
    if n % 5 == 0:
        return (book, n, n * 1.5, None, None, None)
    if n % 4 == 0:
        return (book, n, n * 1.5, "short", psycopg.types.json.Jsonb({"n": n}), ["a", None])
    return (book, n, n * 1.5, _memo(book, n, 0), _attrs(book, n), _labels(book, n))


def _seed(connection: psycopg.Connection) -> None:
    with connection.transaction():
        for book in BOOKS:
            for n in range(1, 11):
                connection.execute("insert into acct.entry values (%s, %s, %s, %s, %s, %s)", _entry(book, n))
        for i in range(1, 7):
            connection.execute(
                "insert into acct.account values (%s, %s, %s)", (f"A-{i}", f"account {i}", _memo("notes", i, 0))
            )


# Batch 1: every placeholder is resolved from the batch itself (the snapshot's rows are in it).
WORKLOAD_1 = [
    # TOASTed text, jsonb and array left alone by an update
    "update acct.entry set amount = amount + 1 where entry_no in (1, 2, 4)",
    # key changes of TOASTed rows (one delete + one create each, perhaps in two partitions) ...
    "update acct.entry set entry_no = entry_no + 100 where entry_no in (3, 9)",
    # ... then the new key updated in the same batch
    "update acct.entry set amount = amount + 5 where entry_no = 103",
    # a key deleted, then another key changed into it
    "delete from acct.entry where entry_no = 6",
    "update acct.entry set entry_no = 6 where entry_no = 7",
    # a TOASTed value that did change
    "update acct.entry set memo = 'rewritten ' || memo where entry_no = 8",
    # the envelope: a placeholder in `after`, a truncate, a reload, a placeholder after the reload
    "update acct.account set name = name || ' (renamed)' where code in ('A-1', 'A-2')",
    "truncate acct.account",
    "insert into acct.account select 'A-' || i, 'reloaded ' || i, repeat('n' || i, 3000) from generate_series(1, 4) i",
    "update acct.account set name = 'renamed after the reload' where code = 'A-3'",
]

# Batch 2: placeholders of rows the table holds; key changes whose old key is only in the table.
WORKLOAD_2 = [
    "update acct.entry set amount = amount + 1 where entry_no in (1, 8, 10)",
    "update acct.entry set entry_no = 202 where entry_no = 2",  # a stored TOASTed row's key changed
    "update acct.entry set entry_no = 301 where entry_no = 103",  # the key batch 1 made, changed
    "update acct.entry set entry_no = 302 where entry_no = 301",  # and changed again in this batch
    "delete from acct.entry where entry_no = 1",  # a stored key deleted, then a stored row changed into it
    "update acct.entry set entry_no = 1 where entry_no = 6",
    "update acct.account set name = 'renamed in batch 2' where code = 'A-4'",
]


def _own_postgresql(live: Live) -> None:
    """The database, schema and tables, by plain psql, and the capture's configuration file for them: an
    external server by its address (the `live` fixture's server stands in for one)."""
    postgres.psql(live.config.postgres, f"create database {DATABASE}")
    postgres.psql(live.config.postgres, SCHEMA_SQL, database=DATABASE)
    config_file = live.root / "ledger.yml"
    config_file.write_text(
        "connection:\n"
        f"  host: 127.0.0.1\n  port: {live.config.pg_port}\n  database: {DATABASE}\n  user: postgres\n"
        "topic_prefix: books\nslot: ledger_slot\npublication: ledger_publication\n"
        "tables:\n"
        "  - {name: acct.entry, key: [book, entry_no], shape: flattened, partitions: 2}\n"
        "  - {name: acct.account, key: [code], shape: envelope}\n"
    )
    live.environ["CDC_LIVE_CONFIG"] = str(config_file)
    live.config = config_from_env(dict(live.environ))
    assert live.config.external and [t.topic for t in live.config.tables] == ["books.acct.entry", "books.acct.account"]
    with psycopg.connect(live.config.conninfo(), autocommit=True) as connection:
        _seed(connection)


def _apply(live: Live, statements: list[str]) -> None:
    """Each statement its own transaction, then every change landed."""
    with psycopg.connect(live.config.conninfo(), autocommit=True) as connection:
        for statement in statements:
            connection.execute(statement)
    live.cli("drain")


def _source_rows(live: Live, table) -> dict[tuple, dict]:
    with psycopg.connect(live.config.conninfo(), row_factory=dict_row) as connection:
        rows = connection.execute(f'select * from "{table.schema}"."{table.name}"').fetchall()
    return {tuple(row[column] for column in table.key): row for row in rows}


def _assert_replay_equals_source(live: Live) -> None:
    for table in live.config.tables:
        expected = _source_rows(live, table)
        replayed, _ = replay(live.topic_dir(table), table.shape, table.key)
        assert replayed == expected, f"{table.qualified}: the replay of its files differs from PostgreSQL"


def _records(live: Live, name: str) -> list[dict]:
    table = next(t for t in live.config.tables if t.name == name)
    return [{**e["record"], "_partition": e["partition"]} for e in read_events(live.topic_dir(table))]


def _assert_cases_in_the_files(live: Live) -> None:
    """What the comparison covers is in the files, as Debezium wrote it."""
    entries = _records(live, "entry")
    updates = [r for r in entries if r["__op"] == "u"]
    assert any(r["memo"] == UNAVAILABLE for r in updates)
    assert any(r["attrs"] == UNAVAILABLE for r in updates)  # jsonb: the placeholder as its text
    assert any(r["labels"] == [UNAVAILABLE] for r in updates)  # text[]: a one-element array
    by_lsn: dict[int, list[dict]] = {}
    for record in entries:
        by_lsn.setdefault(record["__source_lsn"], []).append(record)
    changes = [group for group in by_lsn.values() if sorted(r["__op"] for r in group) == ["c", "d"]]
    assert any(r["memo"] == UNAVAILABLE for group in changes for r in group if r["__op"] == "c")
    assert any(len({r["_partition"] for r in group}) == 2 for group in changes), "no key change across partitions"
    assert any(r["op"] == "t" for r in _records(live, "account"))


def test_the_capture_follows_its_configuration(live: Live):
    _own_postgresql(live)
    live.start_capture()
    _apply(live, WORKLOAD_1)
    _apply(live, WORKLOAD_2)
    _assert_cases_in_the_files(live)
    _assert_replay_equals_source(live)
    assert {path.name for path in live.config.topics_root.iterdir()} == {"books.acct.entry", "books.acct.account"}


def _add_source(project: Path, landing: Path, topic: str, key: str) -> str:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "python_hooks",
            "add-source",
            "debezium",
            topic,
            "--key",
            key,
            "--project-dir",
            str(project),
        ],
        env={**os.environ, "CDC_LANDING_ROOT": str(landing)},
        capture_output=True,
        text=True,
        timeout=120,
        cwd=PROJECT,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of the project's dbt files, for add-source to write into."""
    copy = tmp_path / "project"
    copy.mkdir()
    shutil.copy2(PROJECT / "dbt_project.yml", copy)
    for folder in ("models", "macros", "snapshots", "seeds", "tests/generic"):
        if (PROJECT / folder).is_dir():
            shutil.copytree(PROJECT / folder, copy / folder)
    return copy


def _compare(dbt, live: Live, schema: str, project: Path) -> list[str]:
    common = [*dbt._common(live.config.landing_root, schema, project), "--target", "local"]
    with Session.start(common, runner=dbt._runner) as session:
        results = compare_live(live.config, common, session=session)
    assert {r.table for r in results} == {"entry", "account"}
    assert all(r.source_rows == r.lake_rows > 0 for r in results), [r.line() for r in results]
    return [r.line() for r in results if not r.equal]


def test_the_pipeline_on_an_own_postgresql_equals_it(dbt, spark, live: Live, schema, project):
    landing = live.config.landing_root
    _own_postgresql(live)
    live.start_capture()
    _apply(live, WORKLOAD_1)

    said = _add_source(project, landing, "books.acct.entry", "book,entry_no")
    assert "connector: Debezium's PostgreSQL connector" in said and "__source_lsn" in said
    assert "truncates not seen" in said
    said = _add_source(project, landing, "books.acct.account", "code")
    assert "names the source io.debezium.connector.postgresql.Source" in said
    assert "truncates not seen" not in said

    assert dbt.pipeline("--select", "source:acct+", landing=landing, schema=schema, project=project)
    assert _compare(dbt, live, schema, project) == []

    _apply(live, WORKLOAD_2)
    assert dbt.pipeline("--select", "source:acct+", landing=landing, schema=schema, project=project)
    assert _compare(dbt, live, schema, project) == []
    _assert_cases_in_the_files(live)
