"""One benchmark run: generate, land and apply batches through the real pipeline, measure.

Stages, on the target BENCH_TARGET names (dbt in-process; on `local` everything runs in one
SparkSession, which stays warm; on `cluster`, dbt and the bench's own SQL (bench/sql.py) are
sessions of the cluster's Thrift Server):

  orders (BENCH_ROWS rows, bench/orders.py)
    initial build          first `dbt run` after the full load lands
    warm-up batch k        batches 1..BENCH_BATCHES-1, each landed then `dbt run`
    incremental batch      the last batch: `dbt run --select +bench__orders`            -> R1, R2, S
    handwritten job        the seed's Glue job by hand (SQL), same batch, same table state -> R2
    floor                  scan the key column + write the batch as Parquet             -> R3
    compaction             the project's compaction (cdc_compact_current_state: rewrite_data_files on
                           the files that have delete files, merge-on-read's upkeep; BENCH_COMPACT=0
                           skips it), then a key-column scan again
    full refresh           `dbt run --full-refresh` over every raw file                 -> R1
    stock dbt-spark merge  the stock dbt-spark model on the same batch and table state   -> R4
                           (bench/stock.py; its wrong rows against the replay, by kind, are reported)
  erasure (bench/erasure.py)
    erasure of BENCH_ERASED_CUSTOMERS customers (10): `python -m python_hooks erase` on the 1x table,
                           its raw files and older snapshots; then the table against the replay without them
  orders_scaled (BENCH_SCALE_FACTOR x the rows, batches of the same size)
    the same, up to the incremental batch (and its handwritten job, for comparison)     -> S
  many (BENCH_MANY_TABLES tables, bench/many.py)
    initial run, warm-up runs, incremental run: `make run`'s equivalent over all tables -> M
    handwritten jobs       the hand-written job over every table, same batch and state  -> M
    idle run               `make run` again, no new file; no table may get a commit     -> Z
  history (bench/history.py)
    one table with BENCH_HISTORY_FILES applied files, one with 5, the same new file    -> H

BENCH_STORAGE=s3 runs every stage with the landing zone and the warehouse on a local S3 server
(bench/storage.py; `__main__` starts it before the session and stops it at the end): the same stages,
the same checks, the baselines and the stock model reading the same S3 files and writing to S3.

BENCH_STAGES runs a subset of the groups (context.STAGE_GROUPS; a group another needs runs too); the
ratios of groups that did not run are null. Every stage records the driver's peak heap as a
fraction of its maximum (`peak_heap_fraction`, top level: the run's peak).

Each current-state table is compared with the generator's replay (row count and checksums)
after its incremental batch and after the full refresh.

This module only orchestrates: it builds the run context (bench/context.py), calls the stage
modules in order (bench/orders.py, stock.py, erasure.py, many.py, history.py) and assembles the
results (bench/results.py).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
from pathlib import Path

from bench import erasure, history, many, orders, results
from bench.context import Run, Settings
from bench.harness import BenchDbt, BenchError
from bench.instrument import DriverMemory, RemoteDriver, Stages
from bench.project import build_project
from bench.sql import drop_bench_schemas, open_sql
from bench.storage import BenchStorage, local_storage

log = logging.getLogger(__name__)

__all__ = ["BenchError", "Settings", "run_benchmark"]


def run_benchmark(settings: Settings, work: Path, schema: str = "bench", storage: BenchStorage | None = None) -> dict:
    """Run the selected stages on settings.target, with the files where `storage` says (default: the
    landing zone in the work folder, the warehouse the session has); returns the results (see
    report.write_results)."""
    settings.validate()
    local = settings.target == "local"
    started = dt.datetime.now(dt.timezone.utc)
    load_at_start = os.getloadavg()
    work.mkdir(parents=True, exist_ok=True)
    project = build_project(work, [Path(p) for p in settings.patches], settings.ref)
    memory = DriverMemory() if local else RemoteDriver()
    stages = Stages(memory)
    storage = storage or local_storage(work)
    dbt = BenchDbt(project, schema, storage.landing, work / "logs", settings.target)
    run = Run(settings, work, schema, stages, dbt, storage)
    log.info("stage groups: %s", ", ".join(settings.groups))

    small, large = orders.prepare(run)
    stock_result = many_tables = history_result = idle = erasure_result = None
    try:
        if not local:
            run.sql = open_sql(settings.target)
            dropped = drop_bench_schemas(run.sql, schema)
            if dropped:
                log.info("dropped the last run's schemas on the cluster: %s", ", ".join(dropped))
        with stages.stage("session start (dbt + Spark)"):
            dbt("run-operation", "cdc_create_meta_tables")
        if local:
            run.sql = open_sql(settings.target)
            memory.attach(run.sql.spark)

        if small:
            stock_result = orders.measure(
                run,
                small,
                baselines=True,
                compact=settings.compact,
                full_refresh=True,
                label="1x",
                stock_peer=settings.runs("stock"),
            )
        if small and settings.runs("erasure"):
            erasure_result = erasure.measure(run, small, settings.erased_customers)
        if large:  # BENCH_SCALE_FACTOR=0: no scaled table, no S (quicker tuning runs)
            orders.measure(
                run,
                large,
                baselines=settings.scaled_baselines,
                compact=False,
                full_refresh=False,
                label=f"{settings.scale_factor}x",
            )
        if settings.runs("many"):
            many_tables = many.prepare(run)
            many.measure_batch(run, many_tables, handwritten="many" in settings.stages)
        if settings.runs("idle"):
            idle = many.measure_idle(run, many_tables)
        if settings.runs("history"):
            history_result = history.measure(run)
        spark_settings = results.read_spark_settings(run.sql)
        checked = next((c["relation"] for c in run.checks), None)
        table_settings = results.read_table_settings(run.sql, checked) if checked else {}
        engine = results.read_engine(run.sql)
    finally:
        memory.stop()
        if run.sql is not None:
            run.sql.close()
    return results.assemble(
        settings, run, project, memory, started, load_at_start, spark_settings, table_settings, engine
    ) | {
        "stock": stock_result,
        "many": None
        if many_tables is None
        else {
            "tables": len(many_tables.tables),
            "rows_per_table": settings.many_rows,
            "batch_rows": settings.many_batch,
            "columns": list(many.COLUMNS),
        },
        "idle": idle,
        "history": history_result,
        "erasure": erasure_result,
    }
