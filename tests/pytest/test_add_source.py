"""`python -m python_hooks add-source` end to end, on real Spark and Iceberg.

A copy of the project gets a new DMS table, `retail.store_order`, from its landing folder alone: a
composite key (store_id, order_no), a column named `gift note`, a decimal column spelled `Amount`, a
full load and CDC files (the second one in a DatePartitionEnabled date folder). The command writes
the source entry and the models; the pipeline then builds them, and the current-state table is
compared whole with the pure-Python replay (oracles/replay_dms.py) after each batch, and its data tests pass.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from helpers.paths import PROJECT
from helpers.tables import assert_same_table, table_rows
from oracles.replay_dms import replay
from sample_data import dms

TABLE = "store_order"
COLUMNS = {
    "store_id": pa.int32(),
    "order_no": pa.int64(),
    "gift note": pa.string(),
    "Amount": pa.decimal128(12, 2),
    "placed_at": dms.TIMESTAMP,
}
KEY = ["store_id", "order_no"]
STAGING, CURRENT = "stg_retail__store_order", "retail__store_order"
# Only the new models (and their tests): the other sources are empty here.
SELECT = ("--select", f"{STAGING}+")


def _order(store: int, order: int, version: int = 0, note: str | None = "with love") -> dict:
    return {
        "store_id": store,
        "order_no": order,
        "gift note": None if note is None else f"{note} #{order} v{version}",
        "Amount": Decimal(f"{store * 100 + order}.{version:02d}"),
        "placed_at": dms.LOAD_TIME - dt.timedelta(days=order),
    }


def _key_only(store: int, order: int) -> dict:
    return {name: {"store_id": store, "order_no": order}.get(name) for name in COLUMNS}


def _at(day: int, minute: int, second: int = 0) -> dt.datetime:
    return dt.datetime(2026, 11, day, 9, minute, second, tzinfo=dt.timezone.utc)


def _files() -> list[list[tuple[str, dms.RawFile]]]:
    """Per batch, (folder relative to the table's, file): the full load and a CDC file, then a CDC
    file in a date folder. One order number in two stores is two rows (the key is composite)."""
    ev = dms.Event
    full_load = [ev(TABLE, None, dms.LOAD_TIME, _order(s, o)) for s in (1, 2) for o in range(1, 6)]
    first = [
        ev(TABLE, "I", _at(2, 0), _order(1, 6)),
        ev(TABLE, "U", _at(2, 1), _order(1, 2, 1, note="gift: wrap it, \"please\" 'now'")),
        # equal last_update_time: only AR_H_CHANGE_SEQ orders them (version 2 is last)
        ev(TABLE, "U", _at(2, 2), _order(2, 1, 1)),
        ev(TABLE, "U", _at(2, 2), _order(2, 1, 2)),
        ev(TABLE, "D", _at(2, 3), _key_only(1, 3)),
        # delete then re-insert in one file, and a delete of a key that never existed
        ev(TABLE, "D", _at(2, 4), _key_only(2, 3)),
        ev(TABLE, "I", _at(2, 5), _order(2, 3, 5, note=None)),
        ev(TABLE, "D", _at(2, 6), _key_only(9, 9)),
    ]
    second = [
        ev(TABLE, "U", _at(3, 0), _order(1, 6, 1)),
        ev(TABLE, "D", _at(3, 1), _key_only(1, 1)),
        ev(TABLE, "I", _at(3, 2), _order(3, 1, note=None)),
        # late: committed before (1, 3)'s delete of batch 1, delivered now: must not bring it back
        ev(TABLE, "U", _at(2, 2, 30), _order(1, 3, 9)),
        ev(TABLE, "U", _at(3, 3), _order(2, 3, 6)),
    ]
    batches = [
        [
            ("", dms.RawFile(TABLE, "LOAD00000001.parquet", full_load)),
            ("", dms.RawFile(TABLE, "20261102-091000000.parquet", first)),
        ],
        [("2026/11/03", dms.RawFile(TABLE, "20261103-091000000.parquet", second))],
    ]
    dms._assign_sequences([[f for _, f in batch] for batch in batches])
    return batches


def _write_batch(monkeypatch, folder: Path, batch: list[tuple[str, dms.RawFile]]) -> None:
    """As sample_data/dms.py writes its files (Op first, last_update_time, AR_H_CHANGE_SEQ last)."""
    monkeypatch.setitem(dms.TABLES, TABLE, COLUMNS)
    for subfolder, raw_file in batch:
        (folder / subfolder).mkdir(parents=True, exist_ok=True)
        pq.write_table(dms._table(raw_file), folder / subfolder / raw_file.name, compression="snappy")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of the project's dbt files (profiles come from DBT_PROFILES_DIR)."""
    copy = tmp_path / "project"
    copy.mkdir()
    shutil.copy2(PROJECT / "dbt_project.yml", copy)
    for folder in ("models", "macros", "snapshots", "seeds", "analyses", "tests/generic"):
        if (PROJECT / folder).is_dir():
            shutil.copytree(PROJECT / folder, copy / folder)
    return copy


def _add_source(project: Path, landing: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "python_hooks", "add-source", "dms", "retail", TABLE, "--key", ",".join(KEY)]
        + ["--project-dir", str(project)],
        env={**os.environ, "CDC_LANDING_ROOT": str(landing)},
        capture_output=True,
        text=True,
        timeout=120,
        cwd=PROJECT,
    )


def _assert_matches_replay(spark, schema: str, landing: Path, label: str) -> None:
    columns = [name.lower() for name in COLUMNS] + ["_cdc_op", "_cdc_ts"]
    actual = table_rows(spark, f"{schema}_current.{CURRENT}", KEY, columns)
    expected = replay(landing / "dms" / "retail" / TABLE, KEY)
    assert expected, "the replay is empty: the test data is wrong"
    assert_same_table(actual, expected, label)


def _assert_data_tests_pass(dbt, landing: Path, schema: str, project: Path) -> None:
    result = dbt("test", "--select", CURRENT, STAGING, landing=landing, schema=schema, project=project)
    assert result.success, result.exception
    statuses = {r.node.name: str(r.status) for r in result.result.results if r.node.resource_type == "test"}
    grain = [name for name in statuses if name.startswith("unique_combination_of_columns")]
    assert len(grain) == 1, statuses
    assert {f"not_null_{CURRENT}_{key}" for key in KEY} <= set(statuses), statuses
    assert all(status == "pass" for status in statuses.values()), statuses


def test_add_source_then_pipeline_equals_replay(dbt, spark, schema, project, tmp_path, monkeypatch):
    landing = tmp_path / "landing"
    folder = landing / "dms" / "retail" / TABLE
    first, second = _files()
    _write_batch(monkeypatch, folder, first)
    before = {p: p.read_bytes() for p in (project / "models").rglob("*") if p.is_file()}

    added = _add_source(project, landing)
    assert added.returncode == 0, added.stderr[-3000:]
    written = {
        Path("models/staging/retail/_retail__sources.yml"),
        Path(f"models/staging/retail/{STAGING}.sql"),
        Path("models/staging/retail/_retail__models.yml"),
        Path(f"models/current_state/retail/{CURRENT}.sql"),
        Path("models/current_state/retail/_retail__models.yml"),
    }
    for path in written:
        assert f"created  {path}" in added.stdout, added.stdout
    assert "make run" not in added.stdout and f"dbt test --select {STAGING}+" in added.stdout
    after = {p: p.read_bytes() for p in (project / "models").rglob("*") if p.is_file()}
    assert {p.relative_to(project) for p in set(after) - set(before)} == written
    assert all(after[p] == content for p, content in before.items()), "an existing file changed"
    assert (project / f"models/current_state/retail/{CURRENT}.sql").read_text() == (
        f"{{{{ cdc_current_state('{STAGING}', unique_key=['store_id', 'order_no']) }}}}\n"
    )

    # A second time: refused, nothing written.
    again = _add_source(project, landing)
    assert again.returncode == 1 and "already" in again.stderr, again.stderr[-2000:]
    assert {p: p.read_bytes() for p in (project / "models").rglob("*") if p.is_file()} == after

    assert dbt.pipeline(*SELECT, landing=landing, schema=schema, project=project)
    _assert_matches_replay(spark, schema, landing, "batch 1")
    _assert_data_tests_pass(dbt, landing, schema, project)
    state = table_rows(spark, f"{schema}_current.{CURRENT}", KEY, [*KEY, "gift note", "amount"])
    assert state[(2, 1)]["amount"] == Decimal("201.02"), "AR_H_CHANGE_SEQ breaks the timestamp tie"
    assert state[(1, 2)]["gift note"] == "gift: wrap it, \"please\" 'now' #2 v1"
    assert (1, 1) in state and (2, 1) in state and (1, 3) not in state

    _write_batch(monkeypatch, folder, second)
    assert dbt.pipeline(*SELECT, landing=landing, schema=schema, project=project)
    _assert_matches_replay(spark, schema, landing, "batch 2 (date folder)")
    _assert_data_tests_pass(dbt, landing, schema, project)
    state = table_rows(spark, f"{schema}_current.{CURRENT}", KEY, [*KEY, "gift note"])
    assert (1, 3) not in state, "a late older update must not bring back a deleted key"
    assert (1, 1) not in state and (3, 1) in state and state[(3, 1)]["gift note"] is None
