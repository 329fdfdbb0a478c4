"""The live comparison's pure parts (python_hooks/live/compare.py): the type mapping, the rendering on
both sides, and the differences it reports. Against a real database: tests/pytest/test_live_pipeline.py."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from python_hooks.live.compare import (
    SourceColumn,
    TableComparison,
    postgres_text,
    row_differences,
    spark_text,
    spark_type_of,
)
from python_hooks.live.latency import Event, after_first_batches, events, percentile, summary


@pytest.mark.parametrize(
    ("column", "spark"),
    [
        (SourceColumn("a", "smallint", "int2"), "int"),
        (SourceColumn("a", "integer", "int4"), "int"),
        (SourceColumn("a", "bigint", "int8"), "bigint"),
        (SourceColumn("a", "numeric", "numeric", 12, 2), "decimal(12,2)"),
        (SourceColumn("a", "timestamp with time zone", "timestamptz"), "timestamp"),
        (SourceColumn("a", "timestamp without time zone", "timestamp"), "timestamp"),
        (SourceColumn("a", "date", "date"), "date"),
        (SourceColumn("a", "jsonb", "jsonb"), "string"),
        (SourceColumn("a", "uuid", "uuid"), "string"),
        (SourceColumn("a", "bytea", "bytea"), "binary"),
        (SourceColumn("a", "ARRAY", "_text"), "array<string>"),
        (SourceColumn("a", "ARRAY", "_int4"), "array<int>"),
    ],
)
def test_postgresql_types_map_to_spark_types(column, spark):
    assert spark_type_of(column) == spark


def test_an_unknown_type_is_refused_by_name():
    with pytest.raises(ValueError, match="a: no mapping for PostgreSQL type point"):
        spark_type_of(SourceColumn("a", "point", "point"))


def test_both_sides_render_timestamps_in_utc_with_microseconds():
    assert postgres_text(SourceColumn("t", "timestamp with time zone", "timestamptz")) == (
        "to_char(\"t\" at time zone 'UTC', 'YYYY-MM-DD HH24:MI:SS.US')"
    )
    assert spark_text("t", "timestamp") == "concat('v:', date_format(`t`, 'yyyy-MM-dd HH:mm:ss.SSSSSS'))"
    assert spark_text("b", "binary") == "concat('v:', hex(`b`))"
    assert spark_text("x", "array<string>") == "concat('v:', to_json(`x`))"


def test_differences_name_the_key_the_column_and_both_values():
    source = [("1", "a", "x"), ("2", "b", None), ("3", "c", "z")]
    lake = [("1", "a", "x"), ("2", "b", "__debezium_unavailable_value"), ("4", "d", "w"), ("4", "d", "w")]
    assert row_differences(["id", "name", "body"], [0], source, lake) == [
        "key 4 twice in the lake",
        "key 3 missing",
        "key 4 not in PostgreSQL",
        "body at key 2: PostgreSQL null, lake '__debezium_unavailable_value'",
    ]
    result = TableComparison("t", "s.t", 3, 4, ["d1", "d2"])
    assert result.line(shown=1) == "t: 3 rows in PostgreSQL, 4 in s.t: 2 difference(s): d1; and 1 more"
    assert TableComparison("t", "s.t", 3, 3).line() == "t: 3 rows in PostgreSQL, 3 in s.t: equal"


def test_latency_percentiles_and_parts():
    found = [Event(committed=100.0, landed=101.0 + i / 10, visible=110.0 + i) for i in range(11)]
    assert percentile([e.visible - e.committed for e in found], 0.5) == 15.0
    lines = summary(found)
    assert lines[0] == "latency of 11 change events, seconds:"
    assert "p50   15.0  p95   20.0  max   20.0" in lines[1]


def test_latency_events_come_from_the_landed_files_and_the_ledger(tmp_path):
    """Each non-snapshot event of an applied file: its commit time, the file's mtime, the ledger's time."""
    folder = tmp_path / "pglive.shop.t"
    path = folder / "partition=0" / "pglive.shop.t+0+0000000000.snappy.parquet"
    path.parent.mkdir(parents=True)
    table = pa.table({"id": [1, 2, 3], "__op": ["r", "c", "u"], "__source_ts_ms": [1_000, 2_000, 2_500]})
    pq.write_table(table, path)
    os.utime(path, (4.0, 4.0))
    found = events({"m": folder}, {("m", path.name): 10.0, ("m", "other"): 1.0})
    assert found == [Event(2.0, 4.0, 10.0, "m"), Event(2.5, 4.0, 10.0, "m")]
    assert events({"m": folder}, {}) == []  # not applied yet


def test_latency_once_every_table_had_a_batch_of_the_workload():
    """The cut is the latest of the tables' first batches visible after the workload's start; the snapshot's
    events before the start do not count, and the events committed from the cut on are kept, whatever their table."""
    found = [
        Event(5.0, 6.0, 20.0, "snapshot_only"),  # committed before the workload: not a first batch
        Event(101.0, 103.0, 130.0, "a"),
        Event(102.0, 103.0, 112.0, "a"),  # a's first batch visible at 112
        Event(104.0, 106.0, 125.0, "b"),  # b's first batch visible at 125: the cut
        Event(124.0, 126.0, 140.0, "a"),  # before the cut
        Event(125.0, 127.0, 141.0, "b"),
        Event(130.0, 131.0, 150.0, "a"),
    ]
    moment, warm = after_first_batches(found, since=100.0)
    assert moment == 125.0
    assert warm == [Event(125.0, 127.0, 141.0, "b"), Event(130.0, 131.0, 150.0, "a")]
    assert after_first_batches(found, since=200.0) == (200.0, [])
