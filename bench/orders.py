"""The orders stages (groups `orders` and `scaled`): one table's initial build, warm-up batches and
measured incremental batch through the real pipeline, then, as asked, the hand-written job and the
floor on the same batch and table state (bench/baseline.py), the stock dbt-spark peer (bench/stock.py),
the project's compaction and a full refresh; the table checked against the replay after each.

`prepare` generates the raw files of the 1x table (BENCH_ROWS rows) and of the scaled one
(BENCH_SCALE_FACTOR x the rows, batches of the same size); `measure` runs one table's stages.
"""

from __future__ import annotations

import json

from bench import baseline, stock
from bench.context import Run
from bench.generate import KEY, TableData, generate_table
from bench.harness import check, land, table_layout
from bench.instrument import breakdown, merge_step_seconds


def prepare(run: Run) -> tuple[TableData | None, TableData | None]:
    """Stage `generate raw files`: the orders table and its scaled copy (None when their groups do
    not run)."""
    settings, work = run.settings, run.work
    if not settings.runs("orders"):
        return None, None
    scaled_rows = settings.rows * settings.scale_factor
    kwargs = {"load_file_rows": settings.load_file_rows, "files_per_batch": settings.files_per_batch}
    large = None
    with run.stages.stage("generate raw files", rows=settings.rows + (scaled_rows if settings.runs("scaled") else 0)):
        small = generate_table(
            work / "outbox" / "orders",
            "orders",
            settings.rows,
            settings.batch_rows,
            settings.batches,
            seed=settings.seed,
            **kwargs,
        )
        if settings.runs("scaled"):
            large = generate_table(
                work / "outbox" / "orders_scaled",
                "orders_scaled",
                scaled_rows,
                settings.batch_rows,
                settings.batches,
                seed=settings.seed + 1,
                **kwargs,
            )
    return small, large


def measure(
    run: Run,
    data: TableData,
    *,
    baselines: bool,
    compact: bool,
    full_refresh: bool,
    label: str,
    stock_peer: bool = False,
) -> dict | None:
    """The stages of one orders table, named `<label>: ...`; returns the stock peer's result
    (bench/stock.py) with `stock_peer`, else None."""
    sql, stage = run.sql, run.stages.stage
    model = f"bench__{data.name}"
    relation = run.relation(data.name)
    folder = run.landing.join(f"dms/bench/{data.name}")
    select = ("--select", f"+{model}")

    land(data.load_files, folder)
    with stage(f"{label}: initial build", rows=data.rows) as record:
        statements = run.dbt("run", *select)
    run.breakdowns[record.name] = breakdown(statements, record.seconds)
    for batch in data.batches[:-1]:
        land(batch.files, folder)
        with stage(f"{label}: warm-up batch {batch.number}", rows=batch.events.num_rows) as record:
            statements = run.dbt("run", *select)
        run.breakdowns[record.name] = breakdown(statements, record.seconds)

    measured = data.batches[-1]
    before = baseline.current_snapshot(sql, relation)
    files = land(measured.files, folder)
    with stage(f"{label}: incremental batch", rows=measured.events.num_rows) as record:
        statements = run.dbt("run", *select)
    run.breakdowns[record.name] = breakdown(statements, record.seconds)
    run.merge_steps[label] = merge_step_seconds(statements)
    after = baseline.current_snapshot(sql, relation)
    run.layouts[f"{label} after incremental batch"] = table_layout(sql, relation)
    run.checks.append(check(sql, relation, data, len(data.batches), f"{label} after incremental batch"))

    if baselines:
        baseline.set_current_snapshot(sql, relation, before)
        try:
            with stage(f"{label}: handwritten job", rows=measured.events.num_rows):
                baseline.handwritten_merge(sql, relation, files, KEY)
        finally:
            baseline.set_current_snapshot(sql, relation, after)
        with stage(f"{label}: floor", rows=measured.events.num_rows) as record:
            scan, write = baseline.floor(sql, relation, before, KEY, files, run.storage.scratch.join("floor"))
            record.extra = {"scan_key_column_seconds": round(scan, 3), "write_batch_seconds": round(write, 3)}
    stock_result = stock.measure(run, data, before, label) if stock_peer else None
    if compact:
        # The project's own compaction (macros/cdc/maintenance.sql), forced: what a batch
        # does once the deletes pass the model's cdc_compaction thresholds.
        live_rows = run.checks[-1]["actual"]["rows"]
        with stage(f"{label}: compaction", rows=live_rows) as record:
            run.dbt("run-operation", "cdc_compact_current_state", "--args", json.dumps({"select": [model]}))
            record.extra = baseline.scan_key_column(sql, relation, KEY)
        run.layouts[f"{label} after compaction"] = table_layout(sql, relation)
        run.checks.append(check(sql, relation, data, len(data.batches), f"{label} after compaction"))
    if full_refresh:
        raw_rows = data.rows + sum(b.events.num_rows for b in data.batches)
        with stage(f"{label}: full refresh", rows=raw_rows) as record:
            statements = run.dbt("run", "--full-refresh", *select)
        run.breakdowns[record.name] = breakdown(statements, record.seconds)
        run.layouts[f"{label} after full refresh"] = table_layout(sql, relation)
        run.checks.append(check(sql, relation, data, len(data.batches), f"{label} after full refresh"))
    return stock_result
