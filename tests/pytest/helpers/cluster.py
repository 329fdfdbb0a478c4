"""The cluster target of a test run, read through its Thrift Server (the `cluster` fixture brings it up),
and `make run` on it in a process of its own, as a scheduler starts it (`run_process`, `Output`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterable, Sequence
from pathlib import Path

from helpers.paths import PROJECT

PAUSED = "crm__customer_master"  # the CRM model a paused run waits in (run_process(pause=...))
OTHER = "crm__customer_address"  # the other CRM model, which does not pause


class Cluster:
    """A cluster of this test run (`python -m python_hooks cluster up` on free ports, in its own
    folder), read through its Thrift Server with PyHive: not through the code under test."""

    def __init__(self, root: Path, environ: dict[str, str], up_seconds: float) -> None:
        self.root = root
        self.environ = environ
        self.up_seconds = up_seconds
        self.port = int(environ["CDC_THRIFT_PORT"])

    def _fetch(self, sql: str) -> tuple[list[str], list[tuple]]:
        """Column names and rows with Python values: timestamps, dates and decimals that arrive as
        strings, parsed."""
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
            rows = [
                tuple(kind(v) if kind and isinstance(v, str) else v for kind, v in zip(kinds, row, strict=True))
                for row in cursor.fetchall()
            ]
            return [column[0].split(".")[-1] for column in cursor.description], rows
        finally:
            connection.close()

    def query(self, sql: str) -> list[tuple]:
        """Rows with Python values (`_fetch`)."""
        return self._fetch(sql)[1]

    def records(self, relation: str) -> list[dict]:
        """The whole table, a dict per row."""
        names, rows = self._fetch(f"select * from {relation}")
        return [dict(zip(names, row, strict=True)) for row in rows]

    def execute(self, sql: str) -> None:
        """A statement whose result is not read (DDL: PyHive cannot fetch its result on Spark 3.5)."""
        from pyhive import hive

        connection = hive.connect(host="127.0.0.1", port=self.port, username="pytest")
        try:
            connection.cursor().execute(sql)
        finally:
            connection.close()

    def columns(self, relation: str) -> list[str]:
        names = []
        for name, *_ in self.query(f"describe table {relation}"):
            if not name or name.startswith("#"):
                break  # partitioning and detail sections follow the columns
            names.append(name)
        return names

    def table_rows(self, relation: str, key: Sequence[str], columns: Iterable[str]) -> dict[tuple, dict]:
        """The whole table as key tuple -> {column: value}, like helpers.tables.table_rows()."""
        columns = list(columns)
        quoted = ", ".join("`" + c.replace("`", "``") + "`" for c in columns)
        result = {}
        for row in self.query(f"select {quoted} from {relation}"):
            record = dict(zip(columns, row, strict=True))
            k = tuple(record[c] for c in key)
            assert k not in result, f"{relation}: duplicate key {k}"
            result[k] = record
        return result

    def branches(self, schema: str) -> dict[str, list[str]]:
        """relation -> the branches other than main, of every Iceberg table of `schema`'s databases."""
        found = {}
        for (database,) in self.query(f"show databases like '{schema}_*'"):
            for _, table, temporary in self.query(f"show tables in {database}"):
                if temporary:
                    continue
                try:
                    refs = self.query(f"select name from {database}.{table}.refs where type = 'BRANCH'")
                except Exception:  # noqa: BLE001 - a view or a Parquet table: no refs
                    continue
                found[f"{database}.{table}"] = sorted(name for (name,) in refs if name != "main")
        return found

    @property
    def config(self):
        """The cluster's settings as python_hooks/cluster/ reads them (ports, folders, PID files)."""
        from python_hooks import cluster as manager

        return manager.config_from_env(dict(self.environ))

    def locks(self) -> int:
        from python_hooks import cluster as manager

        return manager.lock_count(self.config)

    def pid(self, part: str) -> int | None:
        """The running process of a part (postgres, master, worker, thrift), from its PID file."""
        from python_hooks.cluster.processes import running_pid

        return running_pid(self.config, part)

    def up(self) -> float:
        """`python -m python_hooks cluster up`: starts the parts that do not run; its seconds."""
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "python_hooks", "cluster", "up"],
            env=self.environ,
            cwd=PROJECT,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, f"cluster up failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
        return time.monotonic() - started

    def statements_running(self) -> int | None:
        """The SQL statements the Thrift Server is running now (Spark's REST API on its UI port; a
        statement is one SQL execution, its commit included); None when the server does not answer."""
        base = f"http://127.0.0.1:{self.environ['CDC_THRIFT_UI_PORT']}/api/v1/applications"
        try:
            with urllib.request.urlopen(base, timeout=5) as response:
                applications = json.load(response)
            running = 0
            for application in applications:
                url = f"{base}/{application['id']}/sql?details=false&offset=0&length=100000"
                with urllib.request.urlopen(url, timeout=10) as response:
                    running += sum(1 for execution in json.load(response) if execution.get("status") == "RUNNING")
            return running
        except (OSError, ValueError):
            return None

    def wait_idle(self, seconds: float) -> float:
        """Waits until the Thrift Server runs no statement and the metastore holds no lock, seen twice
        a second apart: what a killed client's statement still did on the server is then done (the
        server finishes a statement, and commits it, after its client is gone). Returns the seconds."""
        started = time.monotonic()
        quiet = 0
        while quiet < 2:
            if time.monotonic() - started > seconds:
                raise AssertionError(
                    f"the cluster was still busy after {seconds:.0f} s: {self.statements_running()} statement(s)"
                    f" running, {self.locks()} lock(s) held"
                )
            quiet = quiet + 1 if self.statements_running() == 0 and self.locks() == 0 else 0
            time.sleep(1)
        return time.monotonic() - started


def free_ports(count: int) -> list[int]:
    import socket

    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def run_process(schema: str, landing: Path | str, cluster: Cluster, *select: str, pause: int = 0) -> subprocess.Popen:
    """`make run` on the cluster in its own process (what the scheduler starts). With `pause`, one
    model waits at before_publish for up to `pause` seconds, or until `release(cluster, schema)`."""
    environ = {**cluster.environ, "CDC_LANDING_ROOT": str(landing), "CDC_SCHEMA": schema}
    for name in ("CDC_PAUSE_AT", "CDC_PAUSE_SECONDS", "CDC_PAUSE_RELEASE"):
        environ.pop(name, None)
    if pause:
        # One model pauses (its sleep holds one of the cluster's two executor cores; the other is free).
        environ.update(
            {
                "CDC_PAUSE_AT": f"before_publish:{PAUSED}",
                "CDC_PAUSE_SECONDS": str(pause),
                "CDC_PAUSE_RELEASE": release_name(schema),
            }
        )
    target = PROJECT / "target" / f"pytest-{schema}-{os.getpid()}-{time.monotonic_ns()}"
    return subprocess.Popen(
        [sys.executable, "-m", "python_hooks", "run", *select, "--target-path", str(target)],
        env=environ,
        cwd=PROJECT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def release_name(schema: str) -> str:
    return f"{schema}_pause_released"


def release(cluster: Cluster, schema: str) -> None:
    """Ends a pause of `run_process(schema, ..., pause=...)` (macros/cdc/fault_points.sql, cdc_pause_point)."""
    cluster.execute(f"create database if not exists {release_name(schema)}")


def locks_settle(cluster: Cluster, seconds: float) -> int:
    """The metastore's lock count once statements still running on the server have finished: a lock
    a killed client left behind stays until the metastore's timeout (minutes), so it is still seen."""
    deadline = time.monotonic() + seconds
    while (count := cluster.locks()) and time.monotonic() < deadline:
        time.sleep(1)
    return count


class Output:
    """Collects a process's output in a thread; `wait_for` a line."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.process = process
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.append(line)

    def wait_for(self, text: str, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if any(text in line for line in self.lines):
                return
            if self.process.poll() is not None and not self._thread.is_alive():
                break
            time.sleep(0.5)
        raise AssertionError(f"'{text}' not seen in {seconds:.0f} s:\n{''.join(self.lines[-40:])}")

    def finish(self, seconds: float = 600) -> int:
        code = self.process.wait(timeout=seconds)
        self._thread.join(timeout=10)
        return code

    @property
    def text(self) -> str:
        return "".join(self.lines)
