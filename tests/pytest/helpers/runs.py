"""The sample landed stage by stage with a dbt run after each, and what each run left: the tables,
the batch log and what `python -m python_hooks status` says, checked against the replays."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from pathlib import Path

import pytest

from helpers.tables import assert_same_table, normalise


def record_stages(
    dbt,
    spark,
    landing: Path,
    schema: str,
    write_stage,
    stages: int,
    actual,
    expected,
    select: Sequence[str] = (),
    status: bool = False,
) -> dict:
    """Land each stage, run dbt, and record {stage: {success, actual, expected, written, status}}
    per table: the files the stage wrote, and with `status`, what `python -m python_hooks status`
    says after the stage (its clock an hour after the newest commit landed so far).

    `actual(spark, schema)` and `expected(landing)` return {table: {key: row}}."""
    recorded = {}
    for stage in range(1, stages + 1):
        written = write_stage(landing, stage)
        result = dbt("run", *select, landing=landing, schema=schema)
        recorded[stage] = {
            "success": result.success,
            "actual": actual(spark, schema) if result.success else None,
            "expected": expected(landing),
            "written": list(written),
        }
        if status:
            newest = spark.sql(f"select max(newest_commit_at) from {schema}_cdc_meta.cdc_batch_log").collect()[0][0]
            recorded[stage]["now"] = newest + dt.timedelta(hours=1)
            recorded[stage]["status"] = dbt.status(landing, schema, now=recorded[stage]["now"])
    return recorded


def batch_log(spark, schema: str) -> dict[str, list[dict]]:
    """model -> its cdc_batch_log rows, oldest first."""
    rows = spark.sql(f"select * from {schema}_cdc_meta.cdc_batch_log order by started_at").collect()
    result: dict[str, list[dict]] = {}
    for row in rows:
        result.setdefault(row["model_name"], []).append(row.asDict())
    return result


def assert_batch_log(logged: list[dict], expected: list[dict], label: str) -> None:
    """The batch log's rows of one model, one per stage, against the replay's counts
    (oracles/replay_counts.py), every count and the newest commit time."""
    assert len(logged) == len(expected), f"{label}: {len(logged)} batch log rows for {len(expected)} batches"
    for stage, (row, counts) in enumerate(zip(logged, expected, strict=True), start=1):
        assert row["status"] == "applied", f"{label} stage {stage}: {row}"
        assert row["build_mode"] == ("full" if stage == 1 else "incremental"), f"{label} stage {stage}"
        actual = {name: row[name] for name in counts if name != "rows"}
        wanted = {name: normalise(value) for name, value in counts.items() if name != "rows"}
        assert actual == wanted, f"{label} stage {stage}: logged {actual}, replay {wanted}"
        assert row["files_refused"] == 0 and row["refusal"] is None
        assert row["finished_at"] >= row["started_at"] and row["seconds"] >= 0
        assert row["lag_seconds"] == pytest.approx((row["finished_at"] - row["newest_commit_at"]).total_seconds())


def assert_status(recorded: dict, model: str, expected: list[dict], label: str) -> None:
    """What `status` said of `model` after each stage, against the replay's counts of that stage's
    batch and the rows the replay leaves."""
    from python_hooks.commands import status

    newest = None
    for stage, counts in enumerate(expected, start=1):
        table = next(s for s in recorded[stage]["status"] if s.model == model)
        where = f"{label} stage {stage}"
        assert table.rows == counts["rows"], f"{where}: status says {table.rows} rows, replay {counts['rows']}"
        last = {name: table.last[name] for name in counts if name != "rows"}
        assert last == {name: normalise(v) for name, v in counts.items() if name != "rows"}, where
        newest = max(filter(None, [newest, normalise(counts["newest_commit_at"])]))
        assert table.lag_seconds == pytest.approx((recorded[stage]["now"] - newest).total_seconds()), where
        assert (table.files_waiting, table.refused, table.state) == (0, None, "ok"), where
        text = "\n".join(status.render([table]))
        assert f"{counts['rows']} rows" in text and f"{counts['rows_inserted']} inserted" in text, text


def assert_stage(recorded: dict, stage: int) -> None:
    assert recorded[stage]["success"], f"dbt run failed at stage {stage}"
    for table, expected in recorded[stage]["expected"].items():
        assert_same_table(recorded[stage]["actual"][table], expected, f"stage {stage} {table}")
