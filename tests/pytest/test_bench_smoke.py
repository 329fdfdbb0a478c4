"""The benchmark (`python -m bench`, `make bench`) at a tiny scale, in this pytest session's Spark.

Only proves that it works: every stage completes, latest.json is well formed with the four
ratios, and the current-state tables after the measured batch equal a pure-Python replay of the
raw files the benchmark generated (replay_dms.py, written from CDC_FORMATS.md, not from the
pipeline). Timings are never asserted: the numbers come from `make bench` at full scale."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path

from replay_dms import replay

from bench.generate import LOAD_TIME
from bench.report import write_results
from bench.run import Settings, run_benchmark

KEY = ["order_id"]
TINY = Settings(rows=3000, batch_fraction=0.02, batches=1, scale_factor=2, load_file_rows=1000, files_per_batch=2)


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


def test_benchmark_runs_and_its_tables_equal_the_replay(spark, schema, tmp_path):
    results = run_benchmark(TINY, tmp_path / "work", schema=schema)
    json_path, md_path = write_results(results, tmp_path / "results")

    written = json.loads(json_path.read_text(encoding="utf-8"))
    for ratio in ("R1", "R2", "R3", "S"):
        assert isinstance(written[ratio], (int, float)) and written[ratio] > 0, f"{ratio} = {written[ratio]!r}"
        assert isinstance(written["met"][ratio], bool)
    assert {s["stage"] for s in written["stages"]} >= {
        "1x: initial build",
        "1x: incremental batch",
        "1x: handwritten job",
        "1x: floor",
        "1x: full refresh",
        "2x: initial build",
        "2x: incremental batch",
    }
    assert all(s["seconds"] > 0 for s in written["stages"])
    assert written["peak_memory"]["driver_heap_peak_mb"] > 0
    assert written["scale"]["rows"] == TINY.rows and written["scale"]["scaled_rows"] == 2 * TINY.rows
    assert md_path.read_text(encoding="utf-8").startswith("# CDC pipeline benchmark")

    landing = Path(written["landing"]) / "dms" / "bench"
    checks = {c["label"]: c for c in written["checks"]}
    for label, table in (
        ("1x after incremental batch", "orders"),
        ("1x after compaction", "orders"),
        ("1x after full refresh", "orders"),
        ("2x after incremental batch", "orders_scaled"),
    ):
        expected = replay_checksum(landing / table)
        assert expected["rows"] > 0
        assert checks[label]["actual"] == expected, label
        assert checks[label]["equal"], label
    # Merge-on-read: the batch wrote position deletes; the project's compaction folded them back.
    layout = written["table_layout"]
    assert layout["1x after incremental batch"]["position_deletes"]["records"] > 0
    assert set(layout["1x after compaction"]) == {"data"}
    # The batch really was late and mixed: deletes removed rows, inserts added rows beyond the load.
    final = spark.table(f"{schema}_current.bench__orders")
    assert final.count() == replay_checksum(landing / "orders")["rows"]
    assert final.where(f"order_id > {TINY.rows}").count() > 0
