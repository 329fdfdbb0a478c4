"""One process at a time on the embedded warehouse, said in one line.

The `local` target keeps its metastore in embedded Derby, which one JVM at a time can open. A second
process (a `dbt show` while `make run` works, a second `make run`) used to hang for minutes and then
print tens of megabytes of Java stack traces (Derby's XSDB6). Now the first process to open a Spark
session on a Derby metastore holds an exclusive lock on `<warehouse>/.embedded-session.lock` (released
by the operating system when the process ends, kill -9 included) and writes who it is there; a second
one is refused at once, before its JVM touches Derby:

    The embedded warehouse /…/data/warehouse is in use by pid 4242 (make run: python -m python_hooks
    run) since 2026-11-23 10:00:00 UTC. …use the cluster target…

The check runs where every session of this project is created: `SparkSession.Builder.getOrCreate`,
wrapped when pyspark is imported (`install()`, called by the venv's start-up hook,
python_hooks/project/env.py),
so plain `dbt` in the venv, `make run`, `make demo`, pytest and the benchmark all get it.

The same wrapper hands a running session its builder's settings in one call (`_apply_settings`), which
dbt-spark's `session` method asks for before every statement.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import importlib.abc
import importlib.util
import os
import re
import sys
from pathlib import Path
from typing import IO

LOCK_NAME = ".embedded-session.lock"
_held: IO[str] | None = None  # the lock file, open for the life of the process


class WarehouseInUse(RuntimeError):
    pass


def _command_line() -> str:
    try:
        text = Path(f"/proc/{os.getpid()}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        text = " ".join(sys.argv)
    return " ".join(text.split())[:200]  # one line, whatever the arguments hold


class Held(Exception):
    """The lock file is another process's; `holder` is the line it wrote there."""

    def __init__(self, holder: str) -> None:
        super().__init__(holder)
        self.holder = holder


def hold(path: Path, who: str = "") -> IO[str]:
    """An exclusive lock on the file `path` (its folder made), kept while the returned handle is open
    (the operating system releases it when the process ends, kill -9 included), with
    `pid <pid> (<who>) since <time>` written in it (no parentheses without `who`); Held with the
    holder's line when another process has it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = path.open("a+", encoding="utf-8")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "another process"
        handle.close()
        raise Held(holder) from None
    handle.seek(0)
    handle.truncate()
    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    handle.write(f"pid {os.getpid()}{f' ({who})' if who else ''} since {now}\n")
    handle.flush()
    return handle


def acquire(warehouse: Path) -> None:
    """Takes the warehouse for this process, or raises WarehouseInUse naming the process that has it."""
    global _held
    if _held is not None:
        return
    try:
        _held = hold(warehouse / LOCK_NAME, _command_line())
    except Held as held:
        raise WarehouseInUse(
            f"The embedded warehouse {warehouse} is in use by {held.holder}. Its Derby metastore opens in one "
            "process at a time: wait for that one to finish, or, for several people and processes at once, "
            "use the cluster target (make cluster-up, then CDC_TARGET=cluster; docs/cluster.md)."
        ) from None


def release() -> None:
    """Gives the warehouse back (its lock file closed), for a process that deletes the folder the lock
    file is in and then opens a session on the new one, which takes the lock again (make demo)."""
    global _held
    if _held is not None:
        _held.close()
        _held = None


def derby_warehouse(options: dict) -> Path | None:
    """The local folder of a session about to be created on an embedded Derby metastore (the one that
    holds `metastore_db`: the warehouse, or CDC_STATE_DIR for a warehouse on S3), else None."""
    url = str(options.get("spark.hadoop.javax.jdo.option.ConnectionURL", ""))
    if not url.startswith("jdbc:derby:"):
        return None
    database = re.search(r"databaseName=([^;]+)", url)
    if database:
        return Path(database.group(1)).parent
    return Path(str(options.get("spark.sql.warehouse.dir") or os.environ.get("CDC_WAREHOUSE", "spark-warehouse")))


# The settings handed to the running session, as Java maps, by the builder's options (a few at most).
_SETTINGS_MAPS: dict[tuple, object] = {}
_SETTINGS_MAPS_KEPT = 8


def _apply_settings(builder, session) -> None:
    """What pyspark's getOrCreate does with a session that is already running: hand it the builder's
    options again (Spark keeps the ones that may change at run time). dbt-spark's `session` method builds
    a builder of the profile's ~45 settings before every statement; pyspark turns the Python dict into a
    Java map one entry per py4j call, under the builder's class-wide lock, so each statement paid about 6
    ms and dbt's threads waited on each other for it (bench/TUNING.md, round 43). The same options give
    the same map: it is made once and handed over again, one call. The settings are applied as before,
    at every statement."""
    key = tuple(builder._options.items())
    settings = _SETTINGS_MAPS.get(key)
    if settings is None:
        settings = session._jvm.java.util.HashMap()
        for name, value in builder._options.items():
            settings.put(name, value)
        if len(_SETTINGS_MAPS) >= _SETTINGS_MAPS_KEPT:
            _SETTINGS_MAPS.clear()
        _SETTINGS_MAPS[key] = settings
    getattr(getattr(session._jvm, "SparkSession$"), "MODULE$").applyModifiableSettings(session._jsparkSession, settings)


def guard(session_class) -> None:
    """Wraps SparkSession.Builder.getOrCreate: the first session of a process on a Derby metastore
    takes the warehouse lock first; a running session gets the builder's settings in one call
    (`_apply_settings`)."""
    builder = session_class.Builder
    if getattr(builder.getOrCreate, "_cdc_guarded", False):
        return
    original = builder.getOrCreate

    def getOrCreate(self):  # noqa: N802 - pyspark's name
        if session_class._instantiatedSession is None:
            warehouse = derby_warehouse(self._options)
            if warehouse is not None:
                acquire(warehouse)
        running = session_class._instantiatedSession
        if running is not None and running._sc._jsc is not None and not _remote(self._options):
            with self._lock:
                _apply_settings(self, running)
            return running
        return original(self)

    getOrCreate._cdc_guarded = True
    builder.getOrCreate = getOrCreate


def _remote(options: dict) -> bool:
    """Whether pyspark would make a Spark Connect session of these options (its getOrCreate decides that
    first): left to pyspark."""
    return "SPARK_CONNECT_MODE_ENABLED" in os.environ or "SPARK_REMOTE" in os.environ or "spark.remote" in options


def acquire_for_adapter(adapter) -> None:
    """Takes the warehouse for this process when the dbt adapter's target is an embedded session on
    a Derby metastore (what `maintain` needs before it runs beside nothing else); WarehouseInUse
    when another process has it. Nothing for a target that connects to a server."""
    credentials = adapter.config.credentials
    if str(getattr(credentials.method, "value", credentials.method)) != "session":
        return
    warehouse = derby_warehouse(credentials.server_side_parameters or {})
    if warehouse is not None:
        acquire(warehouse)


class _GuardOnImport(importlib.abc.MetaPathFinder):
    """Wraps pyspark.sql.session's SparkSession once that module has been executed."""

    def find_spec(self, name, path, target=None):
        if name != "pyspark.sql.session":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        execute = spec.loader.exec_module

        def exec_module(module):
            execute(module)
            guard(module.SparkSession)

        spec.loader.exec_module = exec_module
        return spec


def install() -> None:
    """Arms the guard for this process without importing pyspark (which most processes never do)."""
    session_module = sys.modules.get("pyspark.sql.session")
    if session_module is not None:
        guard(session_module.SparkSession)
    elif not any(isinstance(finder, _GuardOnImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _GuardOnImport())
