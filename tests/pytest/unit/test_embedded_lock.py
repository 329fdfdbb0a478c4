"""The embedded warehouse's one-process guard (python_hooks/project/embedded_lock.py), without Spark: a
second process is refused at once with one line naming the first, and the lock goes with the
process that held it, kill -9 included. The whole path through pyspark and dbt is in
tests/pytest/test_cluster.py::test_second_process_on_the_embedded_warehouse_gets_one_line."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import lock_holder
from python_hooks.project import embedded_lock


def _try(warehouse: Path) -> subprocess.CompletedProcess:
    code = "import sys; from pathlib import Path; from python_hooks.project import embedded_lock; "
    code += "embedded_lock.acquire(Path(sys.argv[1])); print('acquired')"
    return subprocess.run(
        [sys.executable, "-c", code, str(warehouse)],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=Path(__file__).parents[3],
    )


def test_second_process_is_refused_naming_the_first_then_gets_it_after_kill(tmp_path: Path) -> None:
    holder = lock_holder.start(tmp_path)
    try:
        started = time.monotonic()
        refused = _try(tmp_path)
        assert time.monotonic() - started < 10, "refused at once, not after minutes"
        assert refused.returncode != 0
        last = refused.stderr.strip().splitlines()[-1]
        assert last.startswith("python_hooks.project.embedded_lock.WarehouseInUse: The embedded warehouse")
        assert f"in use by pid {holder.pid} " in last, last
        assert "CDC_TARGET=cluster" in last
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    after = _try(tmp_path)
    assert after.returncode == 0, after.stderr
    assert after.stdout.strip() == "acquired"


def test_only_derby_sessions_are_guarded() -> None:
    assert embedded_lock.derby_warehouse({"spark.sql.warehouse.dir": "/w"}) is None
    derby = {"spark.hadoop.javax.jdo.option.ConnectionURL": "jdbc:derby:;databaseName=/w/metastore_db;create=true"}
    assert embedded_lock.derby_warehouse({**derby, "spark.sql.warehouse.dir": "/w"}) == Path("/w")
    # A warehouse on S3: the lock is where the Derby metastore is (CDC_STATE_DIR), on this machine.
    on_s3 = {"spark.hadoop.javax.jdo.option.ConnectionURL": "jdbc:derby:;databaseName=/state/s3a/b/w/metastore_db"}
    assert embedded_lock.derby_warehouse({**on_s3, "spark.sql.warehouse.dir": "s3a://b/w"}) == Path("/state/s3a/b/w")
    postgres = {"spark.hadoop.javax.jdo.option.ConnectionURL": "jdbc:postgresql://127.0.0.1:15432/metastore"}
    assert embedded_lock.derby_warehouse(postgres) is None


def test_the_same_process_may_open_its_warehouse_again(tmp_path: Path) -> None:
    if embedded_lock._held is not None:
        pytest.skip("this pytest process already holds an embedded warehouse")
    embedded_lock.acquire(tmp_path)
    try:
        embedded_lock.acquire(tmp_path)  # no error: the lock is this process's
        assert f"pid {__import__('os').getpid()} " in (tmp_path / embedded_lock.LOCK_NAME).read_text()
    finally:
        embedded_lock._held.close()
        embedded_lock._held = None
