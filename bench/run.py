"""One benchmark run: generate, land and apply batches through the real pipeline, measure.

Stages, on the target BENCH_TARGET names (dbt in-process; on `local` everything runs in one
SparkSession, which stays warm; on `cluster`, dbt and the bench's own SQL (bench/sql.py) are
sessions of the cluster's Thrift Server):

  orders (BENCH_ROWS rows)
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

BENCH_STAGES runs a subset of the groups (STAGE_GROUPS; a group another needs runs too); the
ratios of groups that did not run are null. Every stage records the driver's peak heap as a
fraction of its maximum (`peak_heap_fraction`, top level: the run's peak).

Each current-state table is compared with the generator's replay (row count and checksums)
after its incremental batch and after the full refresh.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import platform
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bench import baseline, erasure, history, many, stock
from bench.generate import KEY, TableData, generate_table
from bench.harness import LAYOUTS, BenchDbt, BenchError, check, land, table_layout
from bench.instrument import (
    DriverMemory,
    RemoteDriver,
    Stages,
    breakdown,
    cores,
    cpu_model,
    memory_total_mb,
    merge_step_seconds,
)
from bench.project import build_project
from bench.sql import TARGETS, LocalSql, Sql, ThriftSql

log = logging.getLogger(__name__)

__all__ = ["BenchError", "Settings", "run_benchmark"]

RATIOS = ("R1", "R2", "R3", "R4", "S", "M", "Z", "H")
GOALS = {
    "R1": 0.20,
    "R2": 1.15,
    "R3": 3.0,
    "R4": 1.0,
    "S": 1.5,
    "M": 1.5,
    "Z": 2.0,
    "H": 1.3,
    "peak_heap_fraction": 0.75,
}
DEFINITIONS = {
    "R1": "incremental batch (dbt run, warm session) / full refresh of the same table from all raw files",
    "R2": "incremental batch (dbt run) / hand-written job (SQL: dedup + MERGE INTO) on the same batch and table state",
    "R3": "merge step (cdc_merge from reading the pinned batch to the end of its writes to the target) / floor "
    "(scan the target's key column + write the batch's rows as Parquet)",
    "R4": "incremental batch (dbt run) / stock dbt-spark incremental model (merge strategy, unique_key, raw DMS "
    "folder filtered on max(last_update_time), last change per key) on the same batch and table state",
    "S": "incremental batch on the BENCH_SCALE_FACTOR x table / incremental batch on the 1x table (same batch size)",
    "M": "one `make run` (hooks + dbt build, in-process) applying a batch to BENCH_MANY_TABLES small tables / "
    "the hand-written job looping over the same tables and batches in one session",
    "Z": "`make run` with no new file on those tables / its own dbt parse + run-operation cdc_create_meta_tables "
    "(what starts the session in a new process)",
    "H": "incremental batch (dbt run) on a table whose landing folder holds BENCH_HISTORY_FILES applied files / "
    "the same batch on the same rows held in 5 files",
    "peak_heap_fraction": "the Spark driver's peak heap in use over the run / its maximum heap (local target)",
}
# What BENCH_STAGES selects, in the order they run; a group runs the groups it needs too.
STAGE_GROUPS = ("orders", "stock", "erasure", "scaled", "many", "idle", "history")
NEEDS = {"stock": ("orders",), "erasure": ("orders",), "scaled": ("orders",), "idle": ("many",)}


@dataclass(frozen=True)
class Settings:
    rows: int = 5_000_000
    batch_fraction: float = 0.01
    batches: int = 2
    scale_factor: int = 4
    seed: int = 20261101
    load_file_rows: int = 500_000
    files_per_batch: int = 4
    patches: tuple[str, ...] = ()
    ref: str | None = None
    scaled_baselines: bool = True
    compact: bool = True
    target: str = "local"
    stages: tuple[str, ...] = STAGE_GROUPS
    many_tables: int = 20
    many_rows: int = 100_000
    many_batch: int = 1_000
    many_batches: int = 1
    history_files: int = 5_000
    history_file_rows: int = 4
    history_batch: int = 1_000
    history_layout: str = "flat"
    erased_customers: int = 10

    @property
    def batch_rows(self) -> int:
        return max(1, round(self.rows * self.batch_fraction))

    def runs(self, group: str) -> bool:
        return group in self.groups

    @property
    def groups(self) -> tuple[str, ...]:
        """The selected stage groups and those they need, in the order they run."""
        wanted = set(self.stages)
        for group in self.stages:
            wanted.update(NEEDS.get(group, ()))
        if not self.scale_factor:
            wanted.discard("scaled")
        return tuple(g for g in STAGE_GROUPS if g in wanted)

    @classmethod
    def from_env(cls, environ=os.environ) -> Settings:
        def number(name, cast, default):
            value = environ.get(name, "").strip()
            return cast(value) if value else default

        settings = cls(
            rows=number("BENCH_ROWS", int, cls.rows),
            batch_fraction=number("BENCH_BATCH_FRACTION", float, cls.batch_fraction),
            batches=number("BENCH_BATCHES", int, cls.batches),
            scale_factor=number("BENCH_SCALE_FACTOR", int, cls.scale_factor),
            seed=number("BENCH_SEED", int, cls.seed),
            load_file_rows=number("BENCH_LOAD_FILE_ROWS", int, cls.load_file_rows),
            files_per_batch=number("BENCH_FILES_PER_BATCH", int, cls.files_per_batch),
            patches=tuple(p.strip() for p in environ.get("BENCH_PATCH", "").split(",") if p.strip()),
            ref=environ.get("BENCH_REF", "").strip() or None,
            scaled_baselines=environ.get("BENCH_SCALED_BASELINES", "1").strip() not in ("0", "false", "no"),
            compact=environ.get("BENCH_COMPACT", "1").strip() not in ("0", "false", "no"),
            target=environ.get("BENCH_TARGET", "").strip() or cls.target,
            stages=tuple(g.strip() for g in environ.get("BENCH_STAGES", "").split(",") if g.strip()) or cls.stages,
            many_tables=number("BENCH_MANY_TABLES", int, cls.many_tables),
            many_rows=number("BENCH_MANY_ROWS", int, cls.many_rows),
            many_batch=number("BENCH_MANY_BATCH", int, cls.many_batch),
            many_batches=number("BENCH_MANY_BATCHES", int, cls.many_batches),
            history_files=number("BENCH_HISTORY_FILES", int, cls.history_files),
            history_file_rows=number("BENCH_HISTORY_FILE_ROWS", int, cls.history_file_rows),
            history_batch=number("BENCH_HISTORY_BATCH", int, cls.history_batch),
            history_layout=environ.get("BENCH_HISTORY_LAYOUT", "").strip() or cls.history_layout,
            erased_customers=number("BENCH_ERASED_CUSTOMERS", int, cls.erased_customers),
        )
        settings.validate()
        return settings

    def validate(self) -> None:
        settings = self
        if settings.rows < 10 or settings.batches < 1 or settings.scale_factor < 0:
            raise ValueError(f"BENCH_ROWS >= 10, BENCH_BATCHES >= 1, BENCH_SCALE_FACTOR >= 0, got {settings}")
        if not 0 < settings.batch_fraction <= 1:
            raise ValueError(f"BENCH_BATCH_FRACTION must be in (0, 1], got {settings.batch_fraction}")
        if settings.target not in TARGETS:
            raise ValueError(f"BENCH_TARGET must be one of {', '.join(TARGETS)}, got {settings.target!r}")
        unknown = [g for g in settings.stages if g not in STAGE_GROUPS]
        if unknown:
            raise ValueError(f"BENCH_STAGES: unknown group(s) {unknown}; the groups are {', '.join(STAGE_GROUPS)}")
        if min(settings.many_tables, settings.many_rows, settings.many_batch, settings.many_batches) < 1:
            raise ValueError("BENCH_MANY_TABLES, BENCH_MANY_ROWS, BENCH_MANY_BATCH and BENCH_MANY_BATCHES must be >= 1")
        if settings.erased_customers < 1:
            raise ValueError("BENCH_ERASED_CUSTOMERS must be >= 1")
        if min(settings.history_files, settings.history_file_rows, settings.history_batch) < 1:
            raise ValueError("BENCH_HISTORY_FILES, BENCH_HISTORY_FILE_ROWS and BENCH_HISTORY_BATCH must be >= 1")
        if settings.history_layout not in LAYOUTS:
            raise ValueError(
                f"BENCH_HISTORY_LAYOUT must be one of {', '.join(LAYOUTS)}, got {settings.history_layout!r}"
            )


@dataclass
class Run:
    settings: Settings
    work: Path
    schema: str
    stages: Stages
    dbt: BenchDbt
    landing: Path
    checks: list = field(default_factory=list)
    breakdowns: dict = field(default_factory=dict)
    merge_steps: dict = field(default_factory=dict)
    layouts: dict = field(default_factory=dict)
    sql: Sql | None = None
    stock: dict | None = None

    def relation(self, table: str) -> str:
        return f"{self.schema}_current.bench__{table}"

    def table(
        self,
        data: TableData,
        *,
        baselines: bool,
        compact: bool,
        full_refresh: bool,
        label: str,
        stock_peer: bool = False,
    ) -> None:
        sql, stage = self.sql, self.stages.stage
        model = f"bench__{data.name}"
        relation = self.relation(data.name)
        folder = self.landing / "dms" / "bench" / data.name
        select = ("--select", f"+{model}")

        land(data.load_files, folder)
        with stage(f"{label}: initial build", rows=data.rows) as record:
            statements = self.dbt("run", *select)
        self.breakdowns[record.name] = breakdown(statements, record.seconds)
        for batch in data.batches[:-1]:
            land(batch.files, folder)
            with stage(f"{label}: warm-up batch {batch.number}", rows=batch.events.num_rows) as record:
                statements = self.dbt("run", *select)
            self.breakdowns[record.name] = breakdown(statements, record.seconds)

        measured = data.batches[-1]
        before = baseline.current_snapshot(sql, relation)
        files = land(measured.files, folder)
        with stage(f"{label}: incremental batch", rows=measured.events.num_rows) as record:
            statements = self.dbt("run", *select)
        self.breakdowns[record.name] = breakdown(statements, record.seconds)
        self.merge_steps[label] = merge_step_seconds(statements)
        after = baseline.current_snapshot(sql, relation)
        self.layouts[f"{label} after incremental batch"] = table_layout(sql, relation)
        self.checks.append(check(sql, relation, data, len(data.batches), f"{label} after incremental batch"))

        if baselines:
            baseline.set_current_snapshot(sql, relation, before)
            try:
                with stage(f"{label}: handwritten job", rows=measured.events.num_rows):
                    baseline.handwritten_merge(sql, relation, files, KEY)
            finally:
                baseline.set_current_snapshot(sql, relation, after)
            with stage(f"{label}: floor", rows=measured.events.num_rows) as record:
                scan, write = baseline.floor(sql, relation, before, KEY, files, self.work / "floor")
                record.extra = {"scan_key_column_seconds": round(scan, 3), "write_batch_seconds": round(write, 3)}
        if stock_peer:
            self.stock = stock.measure(self, data, before, label)
        if compact:
            # The project's own compaction (macros/cdc/maintenance.sql), forced: what a batch's
            # post-hook does once the deletes pass the model's cdc_compaction thresholds.
            live_rows = self.checks[-1]["actual"]["rows"]
            with stage(f"{label}: compaction", rows=live_rows) as record:
                self.dbt("run-operation", "cdc_compact_current_state", "--args", json.dumps({"select": [model]}))
                record.extra = baseline.scan_key_column(sql, relation, KEY)
            self.layouts[f"{label} after compaction"] = table_layout(sql, relation)
            self.checks.append(check(sql, relation, data, len(data.batches), f"{label} after compaction"))
        if full_refresh:
            raw_rows = data.rows + sum(b.events.num_rows for b in data.batches)
            with stage(f"{label}: full refresh", rows=raw_rows) as record:
                statements = self.dbt("run", "--full-refresh", *select)
            self.breakdowns[record.name] = breakdown(statements, record.seconds)
            self.layouts[f"{label} after full refresh"] = table_layout(sql, relation)
            self.checks.append(check(sql, relation, data, len(data.batches), f"{label} after full refresh"))


SPARK_SETTINGS = (
    "spark.sql.",
    "spark.driver.memory",
    "spark.master",
    "spark.default.parallelism",
    "spark.executor.memory",
    "spark.cores.max",
)
NOT_REPORTED = re.compile(
    # secrets; and the catalogs Iceberg registers in a session by itself (time travel, procedures)
    r"password|secret|token|credential|connectionurl|warehouse|^spark\.sql\.catalog\.default_(cache_)?iceberg\b",
    re.IGNORECASE,
)


def _spark_settings(sql: Sql) -> dict:
    """The Spark settings that shape the numbers: `set` lists the driver's settings and the
    session's; `set <key>` gives a setting's value, its default when unset."""
    wanted = {
        key: value
        for key, value in sql.query("set")
        if key.startswith(SPARK_SETTINGS) and not NOT_REPORTED.search(key) and key not in sql.session_settings
    }
    for key in (
        "spark.sql.shuffle.partitions",
        "spark.sql.adaptive.enabled",
        "spark.sql.adaptive.advisoryPartitionSizeInBytes",
        "spark.sql.autoBroadcastJoinThreshold",
        "spark.sql.iceberg.planning.preserve-data-grouping",
    ):
        for name, value in sql.query(f"set `{key}`"):
            if value != "<undefined>":
                wanted[name] = value
    return dict(sorted(wanted.items()))


def _table_settings(sql: Sql, relation: str) -> dict:
    properties = {
        r[0]: r[1]
        for r in sql.query(f"show tblproperties {relation}")
        if not r[0].startswith(("current-snapshot", "dbt.")) and r[0] not in ("location", "owner")
    }
    partitioning = []
    rows = sql.query(f"describe table extended {relation}")
    in_partitioning = False
    for row in rows:
        name = (row[0] or "").strip()
        if name == "# Partitioning":
            in_partitioning = True
            continue
        if in_partitioning:
            if not name or name.startswith("#"):
                break
            partitioning.append(row[1])
    return {"tblproperties": dict(sorted(properties.items())), "partitioning": partitioning}


def _engine(sql: Sql) -> dict:
    """Java and Spark versions of the driver that runs the statements (the Thrift Server's on `cluster`)."""
    java, version = sql.query("select java_method('java.lang.System', 'getProperty', 'java.version'), version()")[0]
    return {"java": java, "spark": version.split()[0]}


def drop_bench_schemas(sql: Sql, schema: str) -> list[str]:
    """`cluster`: the bench's tables outlive the run in the cluster's metastore (on `local` they are
    in the work folder, emptied at every run). Drop the schemas the bench's target schema owns
    (`<schema>`, `<schema>_staging`, `<schema>_current`, `<schema>_cdc_meta`: a file ledger from
    the last run would skip this run's files, which have the same names), tables purged."""
    owned = {schema, f"{schema}_staging", f"{schema}_current", f"{schema}_cdc_meta"}
    dropped = []
    for (database,) in sql.query("show databases"):
        if database.lower() not in owned:
            continue
        views = {row[1] for row in sql.query(f"show views in {database}") if not row[2]}
        for view in sorted(views):
            sql.execute(f"drop view if exists {database}.{view}")
        for _, table, temporary in sql.query(f"show tables in {database}"):
            if not temporary and table not in views:
                sql.execute(f"drop table if exists {database}.{table} purge")
        sql.execute(f"drop database if exists {database} cascade")
        dropped.append(database)
    return dropped


def _ratio(numerator: float, denominator: float) -> float | None:
    return round(numerator / denominator, 3) if numerator > 0 and denominator > 0 else None


def _open_sql(target: str) -> Sql:
    """`local`: the SparkSession dbt-spark created from the profile (or the one already running in
    this process, a test's). `cluster`: a session of the Thrift Server."""
    if target == "cluster":
        return ThriftSql.connect()
    from pyspark.sql import SparkSession

    return LocalSql(SparkSession.getActiveSession() or SparkSession.builder.getOrCreate())


def _table_data(settings: Settings, work: Path) -> tuple[TableData | None, TableData | None]:
    """The orders table and its scaled copy (None when their groups do not run)."""
    kwargs = {"load_file_rows": settings.load_file_rows, "files_per_batch": settings.files_per_batch}
    small = large = None
    if settings.runs("orders"):
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
            settings.rows * settings.scale_factor,
            settings.batch_rows,
            settings.batches,
            seed=settings.seed + 1,
            **kwargs,
        )
    return small, large


def run_benchmark(settings: Settings, work: Path, schema: str = "bench") -> dict:
    """Run the selected stages on settings.target; returns the results (see report.write_results)."""
    settings.validate()
    local = settings.target == "local"
    started = dt.datetime.now(dt.timezone.utc)
    load_at_start = os.getloadavg()
    work.mkdir(parents=True, exist_ok=True)
    project = build_project(work, [Path(p) for p in settings.patches], settings.ref)
    memory = DriverMemory() if local else RemoteDriver()
    stages = Stages(memory)
    landing = work / "landing"
    dbt = BenchDbt(project, schema, landing, work / "logs", settings.target)
    run = Run(settings, work, schema, stages, dbt, landing)
    log.info("stage groups: %s", ", ".join(settings.groups))

    scaled_rows = settings.rows * settings.scale_factor
    small = large = None
    if settings.runs("orders"):
        with stages.stage("generate raw files", rows=settings.rows + (scaled_rows if settings.runs("scaled") else 0)):
            small, large = _table_data(settings, work)
    many_tables = history_result = idle = erasure_result = None
    try:
        if not local:
            run.sql = _open_sql(settings.target)
            dropped = drop_bench_schemas(run.sql, schema)
            if dropped:
                log.info("dropped the last run's schemas on the cluster: %s", ", ".join(dropped))
        with stages.stage("session start (dbt + Spark)"):
            dbt("run-operation", "cdc_create_meta_tables")
        if local:
            run.sql = _open_sql(settings.target)
            memory.attach(run.sql.spark)

        if small:
            run.table(
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
            run.table(
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
        spark_settings = _spark_settings(run.sql)
        checked = next((c["relation"] for c in run.checks), None)
        table_settings = _table_settings(run.sql, checked) if checked else {}
        engine = _engine(run.sql)
    finally:
        memory.stop()
        if run.sql is not None:
            run.sql.close()
    return _results(settings, run, project, memory, started, load_at_start, spark_settings, table_settings, engine) | {
        "stock": run.stock,
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


def _results(settings, run, project, memory, started, load_at_start, spark_settings, table_settings, engine) -> dict:
    seconds = {r.name: r.seconds for r in run.stages.records}
    cpu = {r.name: r.cpu_seconds or 0.0 for r in run.stages.records}
    big = f"{settings.scale_factor}x"
    incremental = seconds.get("1x: incremental batch", 0)
    idle = seconds.get("many: idle run (make run)", 0)
    idle_base = 0.0
    idle_record = next((r for r in run.stages.records if r.name == "many: idle run (make run)"), None)
    if idle_record:
        idle_base = sum(idle_record.extra["steps_seconds"].get(step, 0.0) for step in many.SESSION_STEPS)
    history_many = history.stage_name(settings.history_files)
    history_few = history.stage_name(min(history.FEW_FILES, settings.history_files))
    ratios = {
        "R1": _ratio(incremental, seconds.get("1x: full refresh", 0)),
        "R2": _ratio(incremental, seconds.get("1x: handwritten job", 0)),
        "R3": _ratio(run.merge_steps.get("1x", 0), seconds.get("1x: floor", 0)),
        "R4": _ratio(incremental, seconds.get("1x: stock dbt-spark merge", 0)),
        "S": _ratio(seconds.get(f"{big}: incremental batch", 0), incremental),
        "M": _ratio(seconds.get("many: incremental run (make run)", 0), seconds.get("many: handwritten jobs", 0)),
        "Z": _ratio(idle, idle_base),
        "H": _ratio(seconds.get(history_many, 0), seconds.get(history_few, 0)),
    }
    max_heap = memory.max_heap
    heap_fraction = round(memory.overall_peak_heap / max_heap, 3) if max_heap and memory.overall_peak_heap else None
    after_gc = memory.overall_peak_after_gc
    extra_ratios = {
        "cpu_time_ratios": {
            "R1": _ratio(cpu.get("1x: incremental batch", 0), cpu.get("1x: full refresh", 0)),
            "R2": _ratio(cpu.get("1x: incremental batch", 0), cpu.get("1x: handwritten job", 0)),
            "R4": _ratio(cpu.get("1x: incremental batch", 0), cpu.get("1x: stock dbt-spark merge", 0)),
            "S": _ratio(cpu.get(f"{big}: incremental batch", 0), cpu.get("1x: incremental batch", 0)),
            "M": _ratio(cpu.get("many: incremental run (make run)", 0), cpu.get("many: handwritten jobs", 0)),
            "H": _ratio(cpu.get(history_many, 0), cpu.get(history_few, 0)),
        },
        "merge_step_seconds": {k: round(v, 3) for k, v in run.merge_steps.items()},
        "S_handwritten": _ratio(seconds.get(f"{big}: handwritten job", 0), seconds.get("1x: handwritten job", 0)),
        "S_merge_step": _ratio(run.merge_steps.get(big, 0), run.merge_steps.get("1x", 0)),
        "R3_floor_at_scale": _ratio(run.merge_steps.get(big, 0), seconds.get(f"{big}: floor", 0)),
        # Z if the run had to start its own session, as `make run` in a new process does: the bench's
        # first dbt command (JVM, Spark session, first parse) added to both sides.
        "Z_cold_process": _ratio(
            idle + seconds.get("session start (dbt + Spark)", 0),
            idle_base + seconds.get("session start (dbt + Spark)", 0),
        )
        if idle
        else None,
    }
    met = {k: (v is not None and v <= GOALS[k]) for k, v in ratios.items()}
    met["peak_heap_fraction"] = heap_fraction is not None and heap_fraction <= GOALS["peak_heap_fraction"]
    scaled_rows = settings.rows * settings.scale_factor
    return {
        **ratios,
        "peak_heap_fraction": heap_fraction,
        "target": settings.target,
        "stage_groups": list(settings.groups),
        "goals": GOALS,
        "met": met,
        "definitions": DEFINITIONS,
        "correct": all(c["equal"] for c in run.checks),
        "started_at": started.isoformat(timespec="seconds"),
        "elapsed_seconds": round((dt.datetime.now(dt.timezone.utc) - started).total_seconds(), 1),
        "machine": {
            "cores": cores(),
            "cpu": cpu_model(),
            "memory_mb": memory_total_mb(),
            "os": platform.platform(),
            "python": platform.python_version(),
            **engine,
            "iceberg": "1.9.2",
            # Other processes competing for the cores make every number slower and noisier.
            "load_average_1m_at_start": round(load_at_start[0], 2),
            "load_average_1m_at_end": round(os.getloadavg()[0], 2),
        },
        "scale": {
            "rows": settings.rows,
            "batch_rows": settings.batch_rows,
            "batch_fraction": settings.batch_fraction,
            "batches": settings.batches,
            "scale_factor": settings.scale_factor,
            "scaled_rows": scaled_rows,
            "batch_mix": "70% updates, 20% inserts, 10% deletes; 5% of the batch late",
            "many_tables": settings.many_tables,
            "many_rows": settings.many_rows,
            "many_batch_rows": settings.many_batch,
            "many_batches": settings.many_batches,
            "history_files": settings.history_files,
            "history_file_rows": settings.history_file_rows,
            "history_batch_rows": settings.history_batch,
            "history_layout": settings.history_layout,
        },
        "stages": [r.as_dict() for r in run.stages.records],
        "details": extra_ratios,
        # None on `cluster`: the driver is the Thrift Server's JVM, not measurable from here.
        "peak_memory": {
            "driver_heap_max_mb": round(max_heap / 2**20) if max_heap else None,
            "driver_heap_peak_mb": round(memory.overall_peak_heap / 2**20) if memory.overall_peak_heap else None,
            "driver_heap_peak_fraction": heap_fraction,
            # The heap after the last garbage collection: what the job held live, garbage excluded.
            "driver_heap_after_gc_peak_mb": round(after_gc / 2**20) if after_gc else None,
            "driver_heap_after_gc_peak_fraction": round(after_gc / max_heap, 3) if after_gc and max_heap else None,
            "driver_rss_peak_mb": round(memory.overall_peak_rss / 2**20) if memory.overall_peak_rss else None,
        },
        "breakdown": run.breakdowns,
        "table_layout": run.layouts,
        "checks": run.checks,
        "settings": {
            "bench": asdict(settings),
            "spark": spark_settings,
            "table": table_settings,
            "patches": list(project.patches),
            "project_files_from": project.ref or "working tree",
        },
        "landing": str(run.landing),
    }
