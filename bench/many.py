"""M and Z: many small tables applied by one `make run`, and a `make run` with nothing new.

M  BENCH_MANY_TABLES tables (default 20; a few columns, BENCH_MANY_ROWS rows each, batches of
   BENCH_MANY_BATCH changes; BENCH_MANY_BATCHES batches, all but the last applied as warm-up runs,
   default 1: none, the session is warm from the stages before) in a dbt project of their own
   (bench/project.py), each table added as a user adds one: `python -m python_hooks add-source dms`
   on its landed full load (`add_sources`), with the models and the data tests add-source writes,
   so M and Z include what real tables pay for their tests; applied by `make run`'s equivalent in this process
   (python_hooks.pipeline.run_pipeline: dbt parse, the state tables, the schema-evolution hook,
   `dbt build`), against the hand-written job (bench/baseline.py) looping over the same tables in
   one session, each table set back to its snapshot before the batch. Every table is checked
   against the replay after the batch.
Z  the same invocation again with no new file, against its own `dbt parse` and
   `run-operation cdc_create_meta_tables` (in a new process, what starts the Spark session): how
   much an idle run costs beyond starting. No Iceberg commit may happen on any of the tables
   (each table's `main` snapshot is compared before and after).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from bench import baseline
from bench.context import Run
from bench.generate import KEY, TableData, generate_table
from bench.harness import BenchDbt, check, land
from bench.instrument import breakdown, statement_counts
from bench.project import build_project
from python_hooks.project.storage import Location
from python_hooks.sources.add_source import add_source

log = logging.getLogger(__name__)

SOURCE = "many"
COLUMNS = (KEY, "order_status", "amount", "quantity", "order_ts")
SESSION_STEPS = ("parse", "run-operation cdc_create_meta_tables")


@dataclass
class ManyTables:
    dbt: BenchDbt
    tables: list[TableData]
    project_dir: Path

    def relation(self, schema: str, data: TableData) -> str:
        return f"{schema}_current.{SOURCE}__{data.name}"


def table_names(count: int) -> list[str]:
    width = max(2, len(str(count)))
    return [f"t{number:0{width}d}" for number in range(1, count + 1)]


def prepare(run: Run) -> ManyTables:
    """Generate the tables' raw files and their dbt project (no model yet: add_sources writes them)."""
    settings = run.settings
    names = table_names(settings.many_tables)
    with run.stages.stage("many: generate raw files", rows=settings.many_tables * settings.many_rows):
        tables = [
            generate_table(
                run.work / "outbox" / SOURCE / name,
                name,
                settings.many_rows,
                settings.many_batch,
                settings.many_batches,
                seed=settings.seed + 1000 + number,
                load_file_rows=settings.load_file_rows,
                files_per_batch=1,
                columns=COLUMNS,
            )
            for number, name in enumerate(names)
        ]
    project = build_project(
        run.work, [Path(p) for p in settings.patches], settings.ref, name="project_many", models=_no_models
    )
    dbt = BenchDbt(project, run.schema, run.landing, run.work / "logs_many", settings.target)
    return ManyTables(dbt, tables, project.project_dir)


def _no_models(models_dir: Path) -> None:
    models_dir.mkdir(parents=True, exist_ok=True)


def add_sources(run: Run, many: ManyTables) -> None:
    """Each table's source entry, its two models and their data tests, written by add-source from the
    footers of its landed raw files (what docs/sources.md tells a user to run)."""
    for data in many.tables:
        add_source(many.project_dir, str(run.landing), "dms", [SOURCE, data.name], [KEY])


def _folder(run: Run, data: TableData) -> Location:
    return run.landing.join(f"dms/{SOURCE}/{data.name}")


def _pipeline_stage(run: Run, many: ManyTables, name: str, rows: int | None) -> dict[str, float]:
    before = _commits(run, many)
    with run.stages.stage(name, rows=rows) as record:
        statements, steps = many.dbt.pipeline()
        record.extra = {"steps_seconds": steps}
    models = [f"{SOURCE}__{data.name}" for data in many.tables]
    after = _commits(run, many)
    commits = {table: after[table] - before.get(table, 0) for table in after}
    tables = [commits.get(many.relation(run.schema, data), 0) for data in many.tables]
    record.extra["counts"] = {
        **statement_counts(statements, models),
        "table_commits_max": max(tables, default=0),
        "meta_commits": {t.rsplit(".", 1)[-1]: n for t, n in sorted(commits.items()) if "_cdc_meta." in t},
    }
    run.breakdowns[record.name] = breakdown(statements, record.seconds)
    return steps


def _commits(run: Run, many: ManyTables) -> dict[str, int]:
    """Snapshots per table: the current-state tables and the meta tables a run commits to (counted
    after the stage's clock, as tests/pytest/test_statement_budget.py counts them)."""
    relations = [many.relation(run.schema, data) for data in many.tables]
    relations += [f"{run.schema}_cdc_meta.{table}" for table in ("cdc_batch_log", "cdc_file_ledger", "cdc_tombstones")]
    counts = {}
    for relation in relations:
        try:
            counts[relation] = int(run.sql.query(f"select count(*) from {relation}.snapshots")[0][0])
        except Exception:  # not created yet (before the first run)
            counts[relation] = 0
    return counts


def _snapshots(run: Run, many: ManyTables) -> dict[str, int | None]:
    return {data.name: baseline.current_snapshot(run.sql, many.relation(run.schema, data)) for data in many.tables}


def measure_batch(run: Run, many: ManyTables, handwritten: bool) -> None:
    """Stages `many: initial run`, warm-up runs, `many: incremental run` (M's numerator) and,
    with `handwritten`, `many: handwritten jobs` (M's denominator)."""
    sql = run.sql
    for data in many.tables:
        land(data.load_files, _folder(run, data))
    add_sources(run, many)
    _pipeline_stage(run, many, "many: initial run (make run)", sum(d.rows for d in many.tables))
    for number in range(1, run.settings.many_batches):
        for data in many.tables:
            land(data.batches[number - 1].files, _folder(run, data))
        _pipeline_stage(run, many, f"many: warm-up run {number}", sum(d.batch_rows for d in many.tables))

    before = _snapshots(run, many)
    batch_files = {data.name: land(data.batches[-1].files, _folder(run, data)) for data in many.tables}
    changes = sum(d.batches[-1].events.num_rows for d in many.tables)
    _pipeline_stage(run, many, "many: incremental run (make run)", changes)
    after = _snapshots(run, many)
    for data in many.tables:
        run.checks.append(
            check(sql, many.relation(run.schema, data), data, len(data.batches), f"many {data.name} after the batch")
        )
    if not handwritten:
        return
    for data in many.tables:
        baseline.set_current_snapshot(sql, many.relation(run.schema, data), before[data.name])
    try:
        with run.stages.stage("many: handwritten jobs", rows=changes):
            for data in many.tables:
                baseline.handwritten_merge(sql, many.relation(run.schema, data), batch_files[data.name], KEY)
    finally:
        for data in many.tables:
            baseline.set_current_snapshot(sql, many.relation(run.schema, data), after[data.name])


def measure_idle(run: Run, many: ManyTables) -> dict:
    """Stage `many: idle run (make run)`: no new file. Returns Z's denominator (`parse` and
    `run-operation cdc_create_meta_tables` of that run) and the tables whose snapshot changed."""
    before = _snapshots(run, many)
    steps = _pipeline_stage(run, many, "many: idle run (make run)", 0)
    after = _snapshots(run, many)
    commits = {name: [before[name], after[name]] for name in before if before[name] != after[name]}
    if commits:
        log.error("the idle run committed to %d table(s): %s", len(commits), ", ".join(sorted(commits)))
    for data in many.tables:
        run.checks.append(
            check(run.sql, many.relation(run.schema, data), data, len(data.batches), f"many {data.name} after idle run")
        )
    return {
        "parse_and_session_seconds": round(sum(steps.get(step, 0.0) for step in SESSION_STEPS), 3),
        "steps_seconds": steps,
        "tables": len(many.tables),
        "tables_committed": len(commits),
        "commits": commits,
    }
