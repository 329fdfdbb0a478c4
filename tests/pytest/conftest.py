"""One Spark session for the whole pytest run: dbt is invoked in-process (dbtRunner), so the
session dbt-spark creates from profiles/profiles.yml is the one the tests read through.

Each test works in its own landing folder and its own schema (CDC_SCHEMA) inside one warehouse
(CDC_WAREHOUSE is fixed for the run: Spark's warehouse and metastore are static settings)."""

from __future__ import annotations

import datetime as dt
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))

# PySpark turns timestamps into naive datetimes in the process's local zone: make it UTC.
os.environ["TZ"] = "UTC"
time.tzset()
# The erasure register's keyed hash (python_hooks/erase.py): Spark reads it from the JVM's environment,
# fixed when the JVM starts, so it is set before the session is.
os.environ.setdefault("CDC_ERASURE_SECRET", "pytest-erasure-secret-0123456789")
# The tests and replays expect the sample's fixed dates, never the demo's clock (sample_data/clock.py).
os.environ.pop("CDC_SAMPLE_TIMES", None)


@pytest.fixture(scope="session")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("warehouse")
    os.environ["CDC_WAREHOUSE"] = str(path)
    os.environ["DBT_PROFILES_DIR"] = str(PROJECT / "profiles")
    return path


class Dbt:
    """Runs dbt in this process against a landing folder and a schema of the caller's choice."""

    def __init__(self, work: Path) -> None:
        from dbt.cli.main import dbtRunner

        self._runner = dbtRunner()
        self._work = work

    def _common(self, landing: Path, schema: str, project: Path | None = None) -> list[str]:
        """`project`: another project folder than this one (e.g. a copy a test changed)."""
        os.environ["CDC_LANDING_ROOT"] = str(landing)
        os.environ["CDC_SCHEMA"] = schema
        target = self._work / schema
        project_dir = str(project or PROJECT)
        return ["--project-dir", project_dir, "--target-path", str(target), "--log-path", str(target / "logs")]

    def __call__(self, *args: str, landing: Path, schema: str, target: str = "local", project: Path | None = None):
        return self._runner.invoke([*args, *self._common(landing, schema, project), "--target", target])

    def pipeline(
        self, *build_args: str, landing: Path, schema: str, target: str = "local", project: Path | None = None
    ) -> bool:
        """`make run`: the Python hooks, then `dbt build` (python_hooks.pipeline), in this process."""
        from python_hooks.pipeline import run_pipeline

        common = [*self._common(landing, schema, project), "--target", target]
        return run_pipeline(build_args, runner=self._runner, common_args=common)

    def status(self, landing: Path, schema: str, now=None, target: str = "local") -> list:
        """`python -m python_hooks status`, in this process: the status of every current-state table."""
        from python_hooks import status
        from python_hooks.warehouse import Warehouse

        common = [*self._common(landing, schema), "--target", target]
        parsed = self._runner.invoke(["parse", "--quiet", *common])
        assert parsed.success, parsed.exception
        with Warehouse.open(common) as warehouse:
            return status.collect(warehouse, parsed.result, now=now)


@pytest.fixture(scope="session")
def dbt(warehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Dbt:
    return Dbt(tmp_path_factory.mktemp("dbt"))


@pytest.fixture(scope="session")
def spark(dbt: Dbt, tmp_path_factory: pytest.TempPathFactory):
    """The SparkSession dbt created (one per pytest run)."""
    from pyspark.sql import SparkSession

    result = dbt("run-operation", "cdc_create_meta_tables", landing=tmp_path_factory.mktemp("none"), schema="bootstrap")
    assert result.success, result.exception
    session = SparkSession.getActiveSession() or SparkSession.builder.getOrCreate()
    assert session.conf.get("spark.sql.catalog.spark_catalog") == "org.apache.iceberg.spark.SparkSessionCatalog"
    return session


@pytest.fixture
def schema() -> str:
    return f"t_{uuid.uuid4().hex[:10]}"


def _normalise(value):
    import datetime as dt

    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return value


def table_rows(spark, relation: str, key: Sequence[str], columns: Iterable[str]) -> dict[tuple, dict]:
    """The whole table as key tuple -> {column: value} for the given columns."""
    columns = list(columns)
    quoted = ["`" + c.replace("`", "``") + "`" for c in columns]
    rows = spark.table(relation).select(*quoted).collect()
    result = {}
    for row in rows:
        record = {c: _normalise(row[c]) for c in columns}
        k = tuple(record[c] for c in key)
        assert k not in result, f"{relation}: duplicate key {k}"
        result[k] = record
    return result


def assert_same_table(actual: dict[tuple, dict], expected: dict[tuple, dict], label: str) -> None:
    """Whole-table equality with a readable difference."""
    expected = {k: {c: _normalise(v) for c, v in row.items()} for k, row in expected.items()}
    missing = sorted(set(expected) - set(actual))
    extra = sorted(set(actual) - set(expected))
    differing = {
        k: {c: (actual[k].get(c), v) for c, v in expected[k].items() if actual[k].get(c) != v}
        for k in set(actual) & set(expected)
    }
    differing = {k: d for k, d in differing.items() if d}
    assert not (missing or extra or differing), (
        f"{label}: missing keys {missing}, unexpected keys {extra}, "
        f"differing (actual, expected): {dict(sorted(differing.items())[:10])}"
    )


def snapshot_ids(spark, relation: str) -> list[int]:
    return [r[0] for r in spark.sql(f"select snapshot_id from {relation}.snapshots order by committed_at").collect()]


Check = Callable[..., None]


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
    (replay_counts.py), every count and the newest commit time."""
    assert len(logged) == len(expected), f"{label}: {len(logged)} batch log rows for {len(expected)} batches"
    for stage, (row, counts) in enumerate(zip(logged, expected, strict=True), start=1):
        assert row["status"] == "applied", f"{label} stage {stage}: {row}"
        assert row["build_mode"] == ("full" if stage == 1 else "incremental"), f"{label} stage {stage}"
        actual = {name: row[name] for name in counts if name != "rows"}
        wanted = {name: _normalise(value) for name, value in counts.items() if name != "rows"}
        assert actual == wanted, f"{label} stage {stage}: logged {actual}, replay {wanted}"
        assert row["files_refused"] == 0 and row["refusal"] is None
        assert row["finished_at"] >= row["started_at"] and row["seconds"] >= 0
        assert row["lag_seconds"] == pytest.approx((row["finished_at"] - row["newest_commit_at"]).total_seconds())


def assert_status(recorded: dict, model: str, expected: list[dict], label: str) -> None:
    """What `status` said of `model` after each stage, against the replay's counts of that stage's
    batch and the rows the replay leaves."""
    from python_hooks import status

    newest = None
    for stage, counts in enumerate(expected, start=1):
        table = next(s for s in recorded[stage]["status"] if s.model == model)
        where = f"{label} stage {stage}"
        assert table.rows == counts["rows"], f"{where}: status says {table.rows} rows, replay {counts['rows']}"
        last = {name: table.last[name] for name in counts if name != "rows"}
        assert last == {name: _normalise(v) for name, v in counts.items() if name != "rows"}, where
        newest = max(filter(None, [newest, _normalise(counts["newest_commit_at"])]))
        assert table.lag_seconds == pytest.approx((recorded[stage]["now"] - newest).total_seconds()), where
        assert (table.files_waiting, table.refused, table.state) == (0, None, "ok"), where
        text = "\n".join(status.render([table]))
        assert f"{counts['rows']} rows" in text and f"{counts['rows_inserted']} inserted" in text, text


def assert_stage(recorded: dict, stage: int) -> None:
    assert recorded[stage]["success"], f"dbt run failed at stage {stage}"
    for table, expected in recorded[stage]["expected"].items():
        assert_same_table(recorded[stage]["actual"][table], expected, f"stage {stage} {table}")


# ---------------------------------------------------------------- the cluster target


class Cluster:
    """A cluster of this test run (`python -m python_hooks cluster up` on free ports, in its own
    folder), read through its Thrift Server with PyHive: not through the code under test."""

    def __init__(self, root: Path, environ: dict[str, str], up_seconds: float) -> None:
        self.root = root
        self.environ = environ
        self.up_seconds = up_seconds
        self.port = int(environ["CDC_THRIFT_PORT"])

    def query(self, sql: str) -> list[tuple]:
        """Rows with Python values: timestamps, dates and decimals that arrive as strings, parsed."""
        import datetime as dt
        from decimal import Decimal

        from pyhive import hive

        parse = {
            "TIMESTAMP_TYPE": dt.datetime.fromisoformat,
            "DATE_TYPE": dt.date.fromisoformat,
            "DECIMAL_TYPE": Decimal,
        }
        connection = hive.connect(host="127.0.0.1", port=self.port, username="pytest")
        try:
            cursor = connection.cursor()
            cursor.execute(sql)
            kinds = [parse.get(column[1]) for column in cursor.description]
            return [
                tuple(kind(v) if kind and isinstance(v, str) else v for kind, v in zip(kinds, row, strict=True))
                for row in cursor.fetchall()
            ]
        finally:
            connection.close()

    def execute(self, sql: str) -> None:
        """A statement whose result is not read (DDL: PyHive cannot fetch its result on Spark 3.5)."""
        from pyhive import hive

        connection = hive.connect(host="127.0.0.1", port=self.port, username="pytest")
        try:
            connection.cursor().execute(sql)
        finally:
            connection.close()

    def table_rows(self, relation: str, key: Sequence[str], columns: Iterable[str]) -> dict[tuple, dict]:
        """The whole table as key tuple -> {column: value}, like table_rows()."""
        columns = list(columns)
        quoted = ", ".join("`" + c.replace("`", "``") + "`" for c in columns)
        result = {}
        for row in self.query(f"select {quoted} from {relation}"):
            record = dict(zip(columns, row, strict=True))
            k = tuple(record[c] for c in key)
            assert k not in result, f"{relation}: duplicate key {k}"
            result[k] = record
        return result

    def locks(self) -> int:
        from python_hooks import cluster as manager

        return manager.lock_count(manager.config_from_env(dict(self.environ)))


def _free_ports(count: int) -> list[int]:
    import socket

    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


@pytest.fixture(scope="session")
def cluster():
    """The shared target, brought up for this run on free ports and torn down after it, also when a
    test fails. `.ci/run` stops it too if pytest itself is killed (data/.test-cluster names it)."""
    import shutil
    import subprocess
    import tempfile

    from python_hooks.cluster import PORTS

    # In /tmp, not pytest's tmp folder: PostgreSQL runs as its own user and must reach its folder.
    root = Path(tempfile.mkdtemp(prefix="cdc-test-cluster-", dir="/tmp"))
    root.chmod(0o755)
    environ = {
        **os.environ,
        **dict(zip(PORTS, map(str, _free_ports(len(PORTS))), strict=True)),
        "CDC_TARGET": "cluster",
        "CDC_CLUSTER_DIR": str(root),
        "CDC_WAREHOUSE": str(root / "warehouse"),
    }
    (PROJECT / "data").mkdir(exist_ok=True)
    (PROJECT / "data" / ".test-cluster").write_text(str(root))
    started = time.monotonic()
    try:
        up = subprocess.run(
            [sys.executable, "-m", "python_hooks", "cluster", "up"],
            env=environ,
            capture_output=True,
            text=True,
            timeout=600,
            cwd=PROJECT,
        )
        assert up.returncode == 0, f"cluster up failed:\n{up.stdout[-2000:]}\n{up.stderr[-4000:]}"
        os.environ["CDC_THRIFT_PORT"] = environ["CDC_THRIFT_PORT"]
        yield Cluster(root, environ, time.monotonic() - started)
    finally:
        subprocess.run(
            [sys.executable, "-m", "python_hooks", "cluster", "down"],
            env=environ,
            cwd=PROJECT,
            timeout=300,
            check=False,
        )
        (PROJECT / "data" / ".test-cluster").unlink(missing_ok=True)
        shutil.rmtree(root, ignore_errors=True)
