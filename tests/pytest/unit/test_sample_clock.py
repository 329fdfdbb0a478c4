"""The demo's clock (sample_data/clock.py, CDC_SAMPLE_TIMES=now), in pure Python: the whole sample
(stages 1-4 and every schema change of evolution.py) written on the fixed dates and on the demo's
clock, compared value by value. Every timestamp moves by a whole number of seconds, the same for a
whole scene; the order of all timestamps and every tie are kept, so is every spacing inside a scene,
DMS file names sort as before and AR_H_CHANGE_SEQ follows its commit time; the newest commit of
every source `make demo` writes lands minutes before the start, nothing it writes after it."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sample_data import clock, debezium, dms, evolution

UTC = dt.timezone.utc
START = dt.datetime(2026, 12, 24, 18, 30, 5, tzinfo=UTC)  # the moment the demo "started"
DEMO_EVOLUTION = [evolution.mysql_status_column, evolution.dms_new_types]  # what make demo's stage 5 writes
TEST_EVOLUTION = [
    evolution.mysql_order_customer_bigint,
    evolution.dms_upper_case_country,
    evolution.dms_city_becomes_int,
    evolution.dms_hostile_names,
]
EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)
SOURCES = {  # folder under the landing root -> its commit-time column
    "dms/crm/customer_master": "last_update_time",
    "dms/crm/customer_address": "last_update_time",
    "debezium/topics/mysql.salesdb.customer": "__source_ts_ms",
    "debezium/topics/mysql.salesdb.sales_order": "__source_ts_ms",
    "debezium/topics/pg.inventory.product": "source.ts_ms",
}


def _write_all(root: Path, writers) -> list[Path]:
    written = []
    for stage in range(1, dms.STAGES + 1):
        written += dms.write_stage(root, stage) + debezium.write_stage(root, stage)
    for write in writers:
        written += write(root)
    return written


@pytest.fixture(scope="module")
def landings(tmp_path_factory) -> dict[str, Path]:
    """The same sample written on the fixed dates and on the demo's clock (started at START)."""
    patch = pytest.MonkeyPatch()
    try:
        patch.delenv(clock.ENV, raising=False)
        fixed = tmp_path_factory.mktemp("fixed")
        _write_all(fixed, DEMO_EVOLUTION + TEST_EVOLUTION)
        patch.setenv(clock.ENV, "now")
        patch.setattr(clock, "started", lambda: START)
        now = tmp_path_factory.mktemp("now")
        _write_all(now, DEMO_EVOLUTION + TEST_EVOLUTION)
        demo = tmp_path_factory.mktemp("demo")
        _write_all(demo, DEMO_EVOLUTION)
    finally:
        patch.undo()
    return {"fixed": fixed, "now": now, "demo": demo}


def _files(root: Path) -> dict[str, list[Path]]:
    """Per table or topic partition folder, its files in name order (DMS: landing order)."""
    folders = defaultdict(list)
    for path in root.rglob("*.parquet"):
        folders[str(path.parent.relative_to(root))].append(path)
    return {folder: sorted(paths) for folder, paths in folders.items()}


def _timestamps(value, kind: pa.DataType, name: str) -> list[tuple[str, dt.datetime]]:
    """(column path, UTC datetime) of every timestamp in one cell, nested fields included."""
    if value is None:
        return []
    if pa.types.is_struct(kind):
        return [p for field in kind for p in _timestamps(value[field.name], field.type, f"{name}.{field.name}")]
    if pa.types.is_timestamp(kind):
        return [(name, value)]
    if name.endswith("ts_ms"):
        return [(name, EPOCH + dt.timedelta(milliseconds=value))]
    return []


def _is_time(column: pa.Field) -> bool:
    return pa.types.is_timestamp(column.type) or column.name.endswith("ts_ms") or column.name == "AR_H_CHANGE_SEQ"


def _without_times(value):
    """A cell with its nested times left out (the envelope's `source.ts_ms`): the rest must not move."""
    return {k: v for k, v in value.items() if k != "ts_ms"} if isinstance(value, dict) else value


def _dms_name_time(name: str) -> dt.datetime | None:
    try:
        return dt.datetime.strptime(name[:18] + "000", "%Y%m%d-%H%M%S%f").replace(tzinfo=UTC)
    except ValueError:
        return None


@pytest.fixture(scope="module")
def pairs(landings) -> list[tuple[dt.datetime, dt.datetime, str]]:
    """(fixed, on the demo's clock, where) for every timestamp of the sample, file names included."""
    fixed_files, now_files = _files(landings["fixed"]), _files(landings["now"])
    assert fixed_files.keys() == now_files.keys()
    found = []
    for folder, fixed_paths in fixed_files.items():
        now_paths = now_files[folder]
        assert len(fixed_paths) == len(now_paths), folder
        for fixed_path, now_path in zip(fixed_paths, now_paths, strict=True):
            where = f"{folder}/{fixed_path.name}"
            fixed_time, now_time = _dms_name_time(fixed_path.name), _dms_name_time(now_path.name)
            if fixed_time is None:
                assert now_path.name == fixed_path.name, where  # LOAD files, Debezium offsets
            else:
                found.append((fixed_time, now_time, f"{where} (name)"))
            fixed_table, now_table = pq.read_table(fixed_path), pq.read_table(now_path)
            assert fixed_table.schema == now_table.schema, where
            for column in fixed_table.schema:
                for row, (a, b) in enumerate(
                    zip(fixed_table[column.name].to_pylist(), now_table[column.name].to_pylist(), strict=True)
                ):
                    assert _without_times(a) == _without_times(b) or _is_time(column), (where, column.name, row)
                    fixed_times = _timestamps(a, column.type, column.name)
                    now_times = _timestamps(b, column.type, column.name)
                    assert [n for n, _ in fixed_times] == [n for n, _ in now_times]
                    moved = zip(fixed_times, now_times, strict=True)
                    found += [(t, u, f"{where} {n} row {row}") for (n, t), (_, u) in moved]
    return found


def test_the_fixed_dates_stay_the_default(landings):
    names = {p.name for p in (landings["fixed"] / "dms" / "crm" / "customer_master").iterdir()}
    assert {"LOAD00000001.parquet", "20261102-091500000.parquet", "20261106-091500000.parquet"} <= names
    assert not clock.enabled()
    t = dt.datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
    assert (
        clock.at(t) == t
        and clock.ms(123) == 123
        and clock.dms_file_name("20261102-091500000.parquet").startswith("20261102-0915")
    )


def test_every_timestamp_moves_by_its_scenes_whole_seconds(pairs):
    assert len(pairs) > 500
    by_scene = defaultdict(set)
    for fixed, now, where in pairs:
        moved = now - fixed
        assert moved == clock.offset(fixed, START), where
        assert moved.microseconds == 0, where
        by_scene[clock._scene(fixed)].add(moved)
    assert all(len(moves) == 1 for moves in by_scene.values())  # spacing inside a scene: kept exactly
    assert sorted(by_scene) == list(range(len(clock.SCENES)))  # every scene is used


def test_order_and_ties_of_all_timestamps_are_kept(pairs):
    ordered = sorted(pairs, key=lambda p: p[0])
    for (t1, u1, w1), (t2, u2, w2) in zip(ordered, ordered[1:], strict=False):
        if t1 == t2:
            assert u1 == u2, (w1, w2)
        else:
            assert u1 < u2, (w1, w2)


def test_dms_file_names_keep_their_landing_order_and_sequences_their_commit_times(landings):
    for table in dms.TABLES:
        fixed = sorted(p.name for p in (landings["fixed"] / "dms" / "crm" / table).iterdir())
        now = sorted(p.name for p in (landings["now"] / "dms" / "crm" / table).iterdir())
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv(clock.ENV, "now")
            patch.setattr(clock, "started", lambda: START)
            assert [clock.dms_file_name(name) for name in fixed] == now
        sequences = []
        for root in ("fixed", "now"):
            events = []
            for path in sorted((landings[root] / "dms" / "crm" / table).glob("2*.parquet")):
                rows = pq.read_table(path, columns=["last_update_time", "AR_H_CHANGE_SEQ"]).to_pylist()
                for row in rows:
                    assert row["AR_H_CHANGE_SEQ"][:14] == row["last_update_time"].strftime("%Y%m%d%H%M%S")
                events += [(row["AR_H_CHANGE_SEQ"], path.name) for row in rows]
            sequences.append(events)
        fixed_events, now_events = sequences
        assert [s[14:] for s, _ in fixed_events] == [s[14:] for s, _ in now_events]  # the counters
        rank = {s: i for i, s in enumerate(sorted({s for s, _ in fixed_events}))}
        now_rank = {s: i for i, s in enumerate(sorted({s for s, _ in now_events}))}
        assert [rank[s] for s, _ in fixed_events] == [now_rank[s] for s, _ in now_events]


def _newest_commit(folder: Path, column: str) -> dt.datetime:
    newest = None
    for path in folder.rglob("*.parquet"):
        table = pq.read_table(path)
        for row in table.to_pylist():
            value = row["source"]["ts_ms"] if column == "source.ts_ms" else row[column]
            if isinstance(value, int):
                value = EPOCH + dt.timedelta(milliseconds=value)
            newest = value if newest is None else max(newest, value)
    return newest


def test_what_make_demo_writes_lands_just_before_its_start(landings):
    newest = {folder: _newest_commit(landings["demo"] / folder, column) for folder, column in SOURCES.items()}
    for folder, commit in newest.items():
        assert START - dt.timedelta(minutes=20) <= commit <= START - clock.LEAD, (folder, commit)
    every = [t for folder, column in SOURCES.items() for t in [_newest_commit(landings["demo"] / folder, column)]]
    assert max(every) < START
    names = [_dms_name_time(p.name) for p in (landings["demo"] / "dms").rglob("2*.parquet")]
    assert max(names) == START - clock.LEAD  # DEMO_NEWEST: the schema change's DMS file


def test_a_time_outside_every_scene_is_refused_on_the_demos_clock(monkeypatch):
    monkeypatch.setenv(clock.ENV, "now")
    monkeypatch.setattr(clock, "started", lambda: START)
    with pytest.raises(ValueError, match="outside every scene"):
        clock.at(dt.datetime(2026, 11, 2, 12, 0, tzinfo=UTC))
    monkeypatch.setenv(clock.ENV, "yesterday")
    with pytest.raises(ValueError, match="CDC_SAMPLE_TIMES='yesterday'"):
        clock.enabled()
