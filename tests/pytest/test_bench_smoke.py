"""The benchmark (`python -m bench`, `make bench`) at a tiny scale, in this pytest session's Spark.

Only proves that it works: every stage completes, latest.json is well formed with the nine
ratios, the current-state tables after the measured batches equal a pure-Python replay of the
raw files the benchmark generated (oracles/replay_dms.py, written from CDC_FORMATS.md, not from the
pipeline), the stock dbt-spark model's wrong rows are counted as that replay counts them, and the
idle run commits nothing. Timings are never asserted: the numbers come from `make bench` at full
scale."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path

import pytest

from bench.generate import LOAD_TIME
from bench.report import write_results
from bench.run import Settings, run_benchmark
from oracles.replay_dms import replay

KEY = ["order_id"]
TINY = Settings(
    rows=3000,
    batch_fraction=0.02,
    batches=1,
    scale_factor=2,
    load_file_rows=1000,
    files_per_batch=2,
    many_tables=3,
    many_rows=500,
    many_batch=20,
    history_files=50,
    history_file_rows=2,
    history_batch=20,
)
RATIOS = ("R1", "R2", "R3", "R4", "S", "M", "Z", "H", "F")


def replay_checksum(folder: Path) -> dict[str, int]:
    """The bench's checksum (generate.CHECKSUM_SQL), computed from the replayed rows."""
    rows = replay(folder, KEY).values()
    load_time = LOAD_TIME.replace(tzinfo=None)

    def micros(ts: dt.datetime) -> int:
        ts = ts.astimezone(dt.timezone.utc).replace(tzinfo=None) if ts.tzinfo else ts
        return (ts - load_time) // dt.timedelta(microseconds=1)

    return {
        "rows": len(rows),
        "sum_key_x_quantity": sum(r["order_id"] * r["quantity"] for r in rows),
        "sum_amount_cents": sum(int(r["amount"] * Decimal(100)) for r in rows),
        "sum_cdc_ts_offset_us": sum(micros(r["_cdc_ts"]) for r in rows),
    }


def stock_wrong_rows(spark, relation: str, expected: dict[tuple, dict]) -> dict[str, int]:
    """The stock model's table against the replay, key by key: rows of deleted keys (kept with
    Op = 'D'), keys missing, rows holding an older change than the replay's, other differences."""
    columns = ["order_id", "Op", "quantity", "amount", "last_update_time"]
    actual = {(row["order_id"],): row for row in spark.table(relation).select(*columns).collect()}
    wrong = {"deleted_keys_present": 0, "missing_key": 0, "older_change_kept": 0, "other": 0}
    for key in actual.keys() | expected.keys():
        if key not in expected:
            assert actual[key]["Op"] == "D", key
            wrong["deleted_keys_present"] += 1
        elif key not in actual:
            wrong["missing_key"] += 1
        elif (actual[key]["quantity"], actual[key]["amount"]) != (expected[key]["quantity"], expected[key]["amount"]):
            older = actual[key]["last_update_time"] < expected[key]["_cdc_ts"].replace(tzinfo=None)
            wrong["older_change_kept" if older else "other"] += 1
    return wrong


@pytest.mark.nightly  # the bench harness, not the pipeline: make test-all (docs/tests.md)
def test_benchmark_runs_and_its_tables_equal_the_replay(spark, schema, tmp_path):
    results = run_benchmark(TINY, tmp_path / "work", schema=schema)
    json_path, md_path = write_results(results, tmp_path / "results")

    written = json.loads(json_path.read_text(encoding="utf-8"))
    for ratio in RATIOS:
        assert isinstance(written[ratio], (int, float)) and written[ratio] > 0, f"{ratio} = {written[ratio]!r}"
        assert isinstance(written["met"][ratio], bool)
    assert written["stage_groups"] == ["orders", "stock", "erasure", "scaled", "many", "idle", "history"]
    assert {s["stage"] for s in written["stages"]} >= {
        "1x: initial build",
        "1x: incremental batch",
        "1x: handwritten job",
        "1x: floor",
        "1x: stock dbt-spark merge",
        "1x: full refresh",
        "1x: erasure of 10 customers",
        "2x: initial build",
        "2x: incremental batch",
        "many: initial run (make run)",
        "many: incremental run (make run)",
        "many: handwritten jobs",
        "many: idle run (make run)",
        "history, 50 applied files: incremental batch",
        "history, 5 applied files: incremental batch",
        "history, 50 files: initial build",
        "history, 50 files: plain Spark build",
    }
    assert all(s["seconds"] > 0 for s in written["stages"])
    assert written["peak_memory"]["driver_heap_peak_mb"] > 0
    assert 0 < written["peak_heap_fraction"] < 1
    assert all(0 < s["peak_heap_fraction"] < 1 for s in written["stages"] if s["peak_heap_fraction"] is not None)
    assert written["scale"]["rows"] == TINY.rows and written["scale"]["scaled_rows"] == 2 * TINY.rows
    assert md_path.read_text(encoding="utf-8").startswith("# CDC pipeline benchmark")

    landing = Path(written["landing"]) / "dms" / "bench"
    before_erasure = Path(written["erasure"]["raw_files_before"])  # the orders files before the erasure stage
    checks = {c["label"]: c for c in written["checks"]}
    for label, folder in (
        ("1x after incremental batch", before_erasure),
        ("1x after compaction", before_erasure),
        ("1x after full refresh", before_erasure),
        ("1x after erasure", landing / "orders"),
        ("2x after incremental batch", landing / "orders_scaled"),
    ):
        expected = replay_checksum(folder)
        assert expected["rows"] > 0
        assert checks[label]["actual"] == expected, label
        assert checks[label]["equal"], label
    # The erasure: the replay of the rewritten raw files lost exactly the erased customers' orders.
    erased = written["erasure"]["customer_ids"]
    assert len(erased) == 10 and written["erasure"]["raw_files_rewritten"] > 0
    assert written["erasure"]["undeclared"] == ["bench__orders_stock"]  # reads the source, declares no subject
    kept = {k: r for k, r in replay(before_erasure, KEY).items() if r["customer_id"] not in erased}
    assert replay(landing / "orders", KEY) == kept
    assert written["erasure"]["rows_removed"]["bench__orders"] == len(replay(before_erasure, KEY)) - len(kept) > 0
    # Merge-on-read: the batch wrote position deletes; the project's compaction folded them back.
    layout = written["table_layout"]
    assert layout["1x after incremental batch"]["position_deletes"]["records"] > 0
    assert set(layout["1x after compaction"]) == {"data"}
    # The batch really was late and mixed: deletes removed rows, inserts added rows beyond the load.
    final = spark.table(f"{schema}_current.bench__orders")
    assert final.count() == replay_checksum(landing / "orders")["rows"]
    assert final.where(f"customer_id in ({', '.join(map(str, erased))})").count() == 0
    assert final.where(f"order_id > {TINY.rows}").count() > 0

    # Many tables: every one equals its replay after the batch and after the idle run, which committed nothing.
    for number in range(1, TINY.many_tables + 1):
        expected = replay_checksum(Path(written["landing"]) / "dms" / "many" / f"t{number:02d}")
        for moment in ("after the batch", "after idle run"):
            assert checks[f"many t{number:02d} {moment}"]["actual"] == expected, (number, moment)
    assert written["idle"]["tables"] == TINY.many_tables
    # The tables are add-source's, with its data tests: each checks what the batch guarantees itself (the key, the
    # contract columns, the sequence's format: commands/selection.py: guaranteed_tests), so neither the run that
    # applied a batch to each nor the idle run ran one.
    counts = {s["stage"]: s["counts"] for s in written["stages"] if "counts" in s}
    assert counts["many: incremental run (make run)"]["test_statements"] == 0
    assert counts["many: idle run (make run)"]["test_statements"] == 0
    assert written["idle"]["tables_committed"] == 0 and written["idle"]["commits"] == {}
    # Landing history: both tables equal the replay of the same events.
    for table in ("history", "history_few"):
        assert checks[f"{table} after its batch"]["actual"] == replay_checksum(landing / table), table
    assert written["history"]["history"]["applied_files"] == 50
    assert written["history"]["history_few"]["applied_files"] == 5

    # R4's side report: the stock dbt-spark model's wrong rows, as the Python replay counts them.
    stock = written["stock"]
    wrong = stock_wrong_rows(spark, stock["relation"], replay(before_erasure, KEY))
    assert wrong["deleted_keys_present"] > 0
    assert stock["by_kind"]["deleted_keys_present"] == wrong["deleted_keys_present"]
    assert stock["others_by_kind"]["batch_change_skipped"] == wrong["older_change_kept"]
    assert stock["others_by_kind"]["missing_key"] == wrong["missing_key"]
    assert stock["wrong_rows"] == sum(wrong.values())
