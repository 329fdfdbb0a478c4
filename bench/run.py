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
  orders_scaled (BENCH_SCALE_FACTOR x the rows, batches of the same size)
    the same, up to the incremental batch (and its handwritten job, for comparison)     -> S

Each current-state table is compared with the generator's replay (row count and checksums)
after its incremental batch and after the full refresh.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import os
import platform
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bench import baseline
from bench.generate import KEY, TableData, expected_state, generate_table, table_checksum
from bench.instrument import (
    DriverMemory,
    RemoteDriver,
    SqlProfile,
    Stages,
    breakdown,
    cores,
    cpu_model,
    memory_total_mb,
    merge_step_seconds,
)
from bench.project import BenchProject, build_project
from bench.sql import TARGETS, LocalSql, Sql, ThriftSql

log = logging.getLogger(__name__)

GOALS = {"R1": 0.20, "R2": 1.15, "R3": 3.0, "S": 1.5}
DEFINITIONS = {
    "R1": "incremental batch (dbt run, warm session) / full refresh of the same table from all raw files",
    "R2": "incremental batch (dbt run) / hand-written job (SQL: dedup + MERGE INTO) on the same batch and table state",
    "R3": "merge step (cdc_merge from reading the pinned batch to the end of its writes to the target) / floor "
    "(scan the target's key column + write the batch's rows as Parquet)",
    "S": "incremental batch on the BENCH_SCALE_FACTOR x table / incremental batch on the 1x table (same batch size)",
}


class BenchError(RuntimeError):
    pass


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

    @property
    def batch_rows(self) -> int:
        return max(1, round(self.rows * self.batch_fraction))

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
        )
        if settings.rows < 10 or settings.batches < 1 or settings.scale_factor < 0:
            raise ValueError(f"BENCH_ROWS >= 10, BENCH_BATCHES >= 1, BENCH_SCALE_FACTOR >= 0, got {settings}")
        if not 0 < settings.batch_fraction <= 1:
            raise ValueError(f"BENCH_BATCH_FRACTION must be in (0, 1], got {settings.batch_fraction}")
        if settings.target not in TARGETS:
            raise ValueError(f"BENCH_TARGET must be one of {', '.join(TARGETS)}, got {settings.target!r}")
        return settings


@contextlib.contextmanager
def _environment(**values: str):
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


class BenchDbt:
    """dbt in this process, on the bench project, recording every statement it sends."""

    def __init__(self, project: BenchProject, schema: str, landing: Path, logs: Path, target: str) -> None:
        from dbt.cli.main import dbtRunner

        self.profile = SqlProfile()
        self._runner = dbtRunner(callbacks=[self.profile])
        self._project = project
        self._env = {"CDC_LANDING_ROOT": str(landing), "CDC_SCHEMA": schema}
        self._logs = logs
        self._target = target

    def __call__(self, *args: str) -> list:
        first = len(self.profile.statements)
        with _environment(**self._env):
            result = self._runner.invoke(
                [
                    *args,
                    "--quiet",
                    "--target",
                    self._target,
                    "--project-dir",
                    str(self._project.project_dir),
                    "--profiles-dir",
                    str(self._project.profiles_dir),
                    "--log-path",
                    str(self._logs),
                ]
            )
        self.profile.close(time.perf_counter())
        if not result.success:
            raise BenchError(f"dbt {' '.join(args)} failed: {result.exception or 'see ' + str(self._logs / 'dbt.log')}")
        return self.profile.statements[first:]


def _land(files: list[Path], folder: Path) -> list[Path]:
    """Move generated files into the landing folder, as the producer's upload would."""
    folder.mkdir(parents=True, exist_ok=True)
    landed = []
    for path in files:
        target = folder / path.name
        os.replace(path, target)
        landed.append(target)
    return landed


def _table_layout(sql: Sql, relation: str) -> dict:
    """Files behind the table's current snapshot: data files and delete files, with sizes."""
    layout = {}
    for content, files, records, size in sql.query(
        f"select content, count(*) as files, sum(record_count) as records, sum(file_size_in_bytes) as bytes "
        f"from {relation}.files group by content"
    ):
        kind = {0: "data", 1: "position_deletes", 2: "equality_deletes"}.get(content, str(content))
        layout[kind] = {"files": files, "records": records, "mb": round(size / 2**20, 1)}
    return layout


def _check(sql: Sql, relation: str, data: TableData, through_batch: int, label: str) -> dict:
    actual = table_checksum(sql, relation)
    expected = expected_state(data, through_batch)
    result = {
        "label": label,
        "relation": relation,
        "expected": expected.as_dict(),
        "actual": actual.as_dict(),
        "equal": actual == expected,
    }
    if actual != expected:
        log.error("%s: table %s differs from the replay: expected %s, actual %s", label, relation, expected, actual)
    return result


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

    def relation(self, table: str) -> str:
        return f"{self.schema}_current.bench__{table}"

    def table(self, data: TableData, *, baselines: bool, compact: bool, full_refresh: bool, label: str) -> None:
        sql, stage = self.sql, self.stages.stage
        model = f"bench__{data.name}"
        relation = self.relation(data.name)
        folder = self.landing / "dms" / "bench" / data.name
        select = ("--select", f"+{model}")

        _land(data.load_files, folder)
        with stage(f"{label}: initial build", rows=data.rows) as record:
            statements = self.dbt("run", *select)
        self.breakdowns[record.name] = breakdown(statements, record.seconds)
        for batch in data.batches[:-1]:
            _land(batch.files, folder)
            with stage(f"{label}: warm-up batch {batch.number}", rows=batch.events.num_rows) as record:
                statements = self.dbt("run", *select)
            self.breakdowns[record.name] = breakdown(statements, record.seconds)

        measured = data.batches[-1]
        before = baseline.current_snapshot(sql, relation)
        files = _land(measured.files, folder)
        with stage(f"{label}: incremental batch", rows=measured.events.num_rows) as record:
            statements = self.dbt("run", *select)
        self.breakdowns[record.name] = breakdown(statements, record.seconds)
        self.merge_steps[label] = merge_step_seconds(statements)
        after = baseline.current_snapshot(sql, relation)
        self.layouts[f"{label} after incremental batch"] = _table_layout(sql, relation)
        self.checks.append(_check(sql, relation, data, len(data.batches), f"{label} after incremental batch"))

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
        if compact:
            # The project's own compaction (macros/cdc/maintenance.sql), forced: what a batch's
            # post-hook does once the deletes pass the model's cdc_compaction thresholds.
            live_rows = self.checks[-1]["actual"]["rows"]
            with stage(f"{label}: compaction", rows=live_rows) as record:
                self.dbt("run-operation", "cdc_compact_current_state", "--args", json.dumps({"select": [model]}))
                record.extra = baseline.scan_key_column(sql, relation, KEY)
            self.layouts[f"{label} after compaction"] = _table_layout(sql, relation)
            self.checks.append(_check(sql, relation, data, len(data.batches), f"{label} after compaction"))
        if full_refresh:
            raw_rows = data.rows + sum(b.events.num_rows for b in data.batches)
            with stage(f"{label}: full refresh", rows=raw_rows) as record:
                statements = self.dbt("run", "--full-refresh", *select)
            self.breakdowns[record.name] = breakdown(statements, record.seconds)
            self.layouts[f"{label} after full refresh"] = _table_layout(sql, relation)
            self.checks.append(_check(sql, relation, data, len(data.batches), f"{label} after full refresh"))


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


def run_benchmark(settings: Settings, work: Path, schema: str = "bench") -> dict:
    """Run every stage on settings.target; returns the results (see report.write_results)."""
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

    scaled_rows = settings.rows * settings.scale_factor
    with stages.stage("generate raw files", rows=settings.rows + scaled_rows):
        small = generate_table(
            work / "outbox" / "orders",
            "orders",
            settings.rows,
            settings.batch_rows,
            settings.batches,
            seed=settings.seed,
            load_file_rows=settings.load_file_rows,
            files_per_batch=settings.files_per_batch,
        )
        large = scaled_rows and generate_table(
            work / "outbox" / "orders_scaled",
            "orders_scaled",
            scaled_rows,
            settings.batch_rows,
            settings.batches,
            seed=settings.seed + 1,
            load_file_rows=settings.load_file_rows,
            files_per_batch=settings.files_per_batch,
        )
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

        run.table(small, baselines=True, compact=settings.compact, full_refresh=True, label="1x")
        if large:  # BENCH_SCALE_FACTOR=0: no scaled table, no S (quicker tuning runs)
            run.table(
                large,
                baselines=settings.scaled_baselines,
                compact=False,
                full_refresh=False,
                label=f"{settings.scale_factor}x",
            )
        spark_settings = _spark_settings(run.sql)
        table_settings = _table_settings(run.sql, run.relation("orders"))
        engine = _engine(run.sql)
    finally:
        memory.stop()
        if run.sql is not None:
            run.sql.close()

    seconds = {r.name: r.seconds for r in stages.records}
    big = f"{settings.scale_factor}x"
    incremental = seconds["1x: incremental batch"]
    floor_seconds = seconds["1x: floor"]
    ratios = {
        "R1": _ratio(incremental, seconds["1x: full refresh"]),
        "R2": _ratio(incremental, seconds["1x: handwritten job"]),
        "R3": _ratio(run.merge_steps["1x"], floor_seconds),
        "S": _ratio(seconds.get(f"{big}: incremental batch", 0), incremental),
    }
    cpu = {r.name: r.cpu_seconds or 0.0 for r in stages.records}
    extra_ratios = {
        "cpu_time_ratios": {
            "R1": _ratio(cpu["1x: incremental batch"], cpu["1x: full refresh"]),
            "R2": _ratio(cpu["1x: incremental batch"], cpu["1x: handwritten job"]),
            "S": _ratio(cpu.get(f"{big}: incremental batch", 0), cpu["1x: incremental batch"]),
        },
        "merge_step_seconds": {k: round(v, 3) for k, v in run.merge_steps.items()},
        "S_handwritten": _ratio(seconds.get(f"{big}: handwritten job", 0), seconds["1x: handwritten job"]),
        "S_merge_step": _ratio(run.merge_steps.get(big, 0), run.merge_steps["1x"]),
        "R3_floor_at_scale": _ratio(run.merge_steps.get(big, 0), seconds.get(f"{big}: floor", 0)),
    }
    return {
        **ratios,
        "target": settings.target,
        "goals": GOALS,
        "met": {k: (v is not None and v <= GOALS[k]) for k, v in ratios.items()},
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
        },
        "stages": [r.as_dict() for r in stages.records],
        "details": extra_ratios,
        # None on `cluster`: the driver is the Thrift Server's JVM, not measurable from here.
        "peak_memory": {
            "driver_heap_max_mb": round(memory.max_heap / 2**20) if memory.max_heap else None,
            "driver_heap_peak_mb": round(memory.overall_peak_heap / 2**20) if memory.overall_peak_heap else None,
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
        "landing": str(landing),
    }
