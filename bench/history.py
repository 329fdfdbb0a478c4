"""H: does a batch cost more when the landing folder holds a long history of applied files?

Two tables with the same change events (bench/generate.py, `generate_history`: small CDC files
of inserts, then one new file of changes): `history`, whose folder holds BENCH_HISTORY_FILES
applied files (default 5,000), and `history_few`, whose folder holds the same events in 5 files.
Each is built in one run over all its files; then the same new file lands in both and one
`make run` (the pipeline in this process: hooks, then `dbt build --select +<model>`) is timed for each
(the 5-file table's first). H = the many-files table's batch / the 5-file table's. Both runs are the
scheduler's command: the hooks list every folder of the project in Python and read the footers of new
files only, and the staging view is left as it is when the new file brings no schema change
(python_hooks/evolution/staging_views.py).

F: the many-files table's initial build (`make run`: the hooks read its 5,000 footers, dbt builds it)
/ plain Spark reading the same files into an Iceberg table
(`create table ... using iceberg as select * from parquet.`<folder>``: no dedup, no ledger, no
validation), the least a first build from those files could cost.

BENCH_HISTORY_LAYOUT=dated lands the files as DMS does with DatePartitionEnabled: in
`<table>/<yyyy>/<mm>/<dd>/` by the date each was written (the history spans several days).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from bench.context import Run
from bench.generate import generate_history
from bench.harness import check, land, table_layout
from bench.instrument import breakdown
from bench.sql import quote_path
from python_hooks.project.storage import Location

FEW_FILES = 5


def stage_name(files: int) -> str:
    return f"history, {files:,} applied files: incremental batch"


def build_stage_name(files: int) -> str:
    return f"history, {files:,} files: initial build"


def plain_build_stage_name(files: int) -> str:
    return f"history, {files:,} files: plain Spark build"


def measure(run: Run) -> dict:
    settings = run.settings
    outbox = run.work / "outbox" / "history"
    with run.stages.stage("history: generate raw files", rows=settings.history_files * settings.history_file_rows):
        data, few = generate_history(
            outbox,
            "history",
            settings.history_files,
            settings.history_file_rows,
            settings.history_batch,
            seed=settings.seed + 2,
            few_files=FEW_FILES,
        )
        new_file = data.batches[1].files
        (outbox / "batch_few").mkdir(parents=True, exist_ok=True)
        few_new = [Path(shutil.copy2(path, outbox / "batch_few" / path.name)) for path in new_file]
    variants = {"history": (data.batches[0].files, new_file), "history_few": (few, few_new)}
    result = {"layout": settings.history_layout, "new_file_changes": data.batches[1].events.num_rows}
    for table, (history_files, _) in variants.items():
        land(history_files, run.landing.join(f"dms/bench/{table}"), settings.history_layout)
        with run.stages.stage(build_stage_name(len(history_files)), rows=data.batches[0].events.num_rows) as record:
            statements, _ = run.dbt.pipeline("--select", f"+bench__{table}")
        run.breakdowns[record.name] = breakdown(statements, record.seconds)
        run.checks.append(check(run.sql, run.relation(table), data, 0, f"{table} after its initial build"))
    _plain_build(run, run.landing.join("dms/bench/history"), len(variants["history"][0]), data)
    # The few-files table's batch first: a later run in a session is, if anything, the warmer one.
    for table in ("history_few", "history"):
        history_files, batch_files = variants[table]
        land(batch_files, run.landing.join(f"dms/bench/{table}"), settings.history_layout)
        name = stage_name(len(history_files))
        with run.stages.stage(name, rows=data.batches[1].events.num_rows) as record:
            statements, _ = run.dbt.pipeline("--select", f"+bench__{table}")
        run.breakdowns[record.name] = breakdown(statements, record.seconds)
        run.layouts[f"{table} after its batch"] = table_layout(run.sql, run.relation(table))
        run.checks.append(check(run.sql, run.relation(table), data, 1, f"{table} after its batch"))
        result[table] = {"applied_files": len(history_files), "stage": name}
    return result


def _plain_build(run: Run, folder: Location, files: int, data) -> None:
    """F's yardstick: the same raw files read by plain Spark into a new Iceberg table."""
    glob = "*.parquet" if run.settings.history_layout == "flat" else "*/*/*/*.parquet"
    relation = f"{run.schema}_current.bench__history_plain"
    run.sql.execute(f"drop table if exists {relation}")
    with run.stages.stage(plain_build_stage_name(files), rows=data.batches[0].events.num_rows):
        run.sql.execute(
            f"create table {relation} using iceberg as select * from parquet.{quote_path(folder.join(glob))}"
        )
    run.sql.execute(f"drop table if exists {relation} purge")
