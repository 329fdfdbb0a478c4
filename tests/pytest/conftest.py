"""One Spark session for the whole pytest run: dbt is invoked in-process (dbtRunner), so the
session dbt-spark creates from profiles/profiles.yml is the one the tests read through.

Each test works in its own landing folder and its own schema (CDC_SCHEMA) inside one warehouse
(CDC_WAREHOUSE is fixed for the run: Spark's warehouse and metastore are static settings).

Fixtures only: what the tests share besides them is in helpers/, the replays in oracles/."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import parse_template
from helpers.adapter_suite import SUITE_TARGET
from helpers.cluster import Cluster, free_ports
from helpers.dbt_runner import Dbt
from helpers.live import Live
from helpers.paths import PROJECT
from helpers.s3 import S3_VARIABLES, Server, server_variables, started_server, with_bucket_of_its_own
from python_hooks.project import env

# PySpark turns timestamps into naive datetimes in the process's local zone: make it UTC.
os.environ["TZ"] = "UTC"
time.tzset()
# The erasure register's keyed hash (python_hooks/personal_data/): Spark reads it from the JVM's environment,
# fixed when the JVM starts, so it is set before the session is.
os.environ.setdefault("CDC_ERASURE_SECRET", "pytest-erasure-secret-0123456789")
# The tests and replays expect the sample's fixed dates, never the demo's clock (sample_data/clock.py).
os.environ.pop("CDC_SAMPLE_TIMES", None)


# What a test needs, from the fixtures it asks for (pytest.ini's markers; docs/tests.md): `make test` runs the
# tests that need the run's own servers in one pytest process and the others in a second one, side by side.
NEEDS = {
    "spark": {"spark", "dbt", "warehouse"},
    "cluster": {"cluster", "cluster_s3"},
    "s3": {"s3_server", "cluster_s3"},
    "live": {"live"},
    "browser": set(),  # a module that drives Chromium says so (pytestmark)
    "subprocess": set(),  # so does one that runs the project's commands as processes of their own
}
UNIT = Path(__file__).parent / "unit"
ADAPTER_SUITE = Path(__file__).parent / "adapter_suite"  # its `project` fixture brings the suite's target up


def _conftest_fixtures(item: pytest.Item) -> set[str]:
    """The fixtures of this file `item` asks for (not a parameter or a module's fixture of the same name)."""
    definitions = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    return {name for name, defs in definitions.items() if defs and defs[-1].func.__module__ == __name__}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        fixtures = _conftest_fixtures(item)
        for marker, names in NEEDS.items():
            if fixtures & names:
                item.add_marker(marker)
        if item.get_closest_marker("live_capture"):
            item.add_marker("live")
        if item.path.is_relative_to(ADAPTER_SUITE):
            item.add_marker("spark" if SUITE_TARGET == "local" else "cluster")
        if item.path.is_relative_to(UNIT):
            needs = [m for m in NEEDS if item.get_closest_marker(m)]
            if needs:  # make test-fast runs tests/pytest/unit without a JVM or a server
                raise pytest.UsageError(f"{item.nodeid}: a unit test needs {', '.join(needs)}; move it out of unit/")


@pytest.fixture(scope="session", autouse=True)
def parse_template_of_the_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The run's one dbt parse (helpers/parse_template.py), made when a test first needs a dbt target folder."""
    parse_template.TEMPLATE = parse_template.ParseTemplate(
        tmp_path_factory.mktemp("parse-template"), parse_template.parse
    )
    yield
    parse_template.TEMPLATE = None


@pytest.fixture(scope="session")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("warehouse")
    os.environ["CDC_WAREHOUSE"] = str(path)
    os.environ["DBT_PROFILES_DIR"] = str(PROJECT / "profiles")
    env.apply_defaults()  # what follows the warehouse (CDC_STATE_DIR: its Derby metastore) follows it
    return path


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


@pytest.fixture(scope="session")
def s3_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The run's local S3 server (helpers/s3.py), started once for every module that asks for `s3_server`,
    stopped after the last one, also when one fails; os.environ untouched."""
    with started_server(tmp_path_factory.mktemp("s3")) as server:
        yield server


@pytest.fixture(scope="module")
def s3_server(s3_session: Server) -> Iterator[Server]:
    """The run's local S3 server, with the standard variables that reach it in os.environ for the module's
    tests (as `eval "$(python -m python_hooks s3 env)"` gives them), os.environ as it was afterwards. No
    Spark; a module that also uses the run's SparkSession and runs first gets the server up before it, so
    the profile sees the endpoint. Each module has a bucket of its own on it."""
    with server_variables(with_bucket_of_its_own(s3_session)) as server:
        yield server


@pytest.fixture(scope="session")
def cluster_s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The S3 server of the cluster's warehouse (helpers/s3.py), for the whole run; os.environ untouched."""
    with started_server(tmp_path_factory.mktemp("cluster-s3"), marker_name=".test-s3-cluster") as server:
        yield server


@pytest.fixture(scope="session")
def cluster(cluster_s3: Server):
    """The shared target as teams run it beyond one machine: its warehouse on S3 (a real local server,
    `cluster_s3`), brought up for this run on free ports and torn down after it, also when a test
    fails. `.ci/run` stops both too if pytest itself is killed (data/.test-cluster and
    data/.test-s3-cluster name them)."""
    import shutil
    import subprocess
    import tempfile

    from python_hooks.cluster.config import PORTS

    # In /tmp, not pytest's tmp folder: PostgreSQL runs as its own user and must reach its folder.
    root = Path(tempfile.mkdtemp(prefix="cdc-test-cluster-", dir="/tmp"))
    root.chmod(0o755)
    environ = {
        **{k: v for k, v in os.environ.items() if k not in S3_VARIABLES},
        **cluster_s3.variables,
        **dict(zip(PORTS, map(str, free_ports(len(PORTS))), strict=True)),
        "CDC_TARGET": "cluster",
        "CDC_CLUSTER_DIR": str(root),
        "CDC_WAREHOUSE": f"s3a://{cluster_s3.bucket}/warehouse",
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


@pytest.fixture
def live() -> Iterator[Live]:
    """A live PostgreSQL source of the test's own (helpers/live.py), stopped afterwards with any capture."""
    root = Path(tempfile.mkdtemp(prefix="cdc-test-live-", dir="/tmp"))
    root.chmod(0o755)
    live = Live(root)
    marker = PROJECT / "data" / ".test-live"
    marker.parent.mkdir(exist_ok=True)
    marker.write_text(str(root))
    try:
        live.cli("pg-up", "--demo-schema")
        yield live
    finally:
        live.kill_captures()
        private = {name: value for name, value in live.environ.items() if name != "CDC_LIVE_CONFIG"}
        subprocess.run([sys.executable, "-m", "python_hooks", "live", "pg-down"], env=private, cwd=PROJECT, timeout=120)
        marker.unlink(missing_ok=True)
        shutil.rmtree(root, ignore_errors=True)
