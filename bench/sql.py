"""The bench's own SQL on the target it measures (BENCH_TARGET): one interface, one class per target.

Every statement the bench itself sends (the checks against the replay, table layout and settings,
snapshot get/set for the baselines, the hand-written job, the floor) goes through it, so the same
code measures both targets:

    LocalSql   `local`: the process's SparkSession, the one dbt-spark's `session` method created,
               so the bench's statements run in the same warm JVM as dbt's;
    ThriftSql  `cluster`: one PyHive session on the cluster's Spark Thrift Server (`make cluster-up`),
               the server the profile's `cluster` target points at, open for the whole run.

    sql.query("select ...")        rows, a list of tuples
    sql.execute("merge into ...")  DDL/DML: nothing fetched (PyHive fails fetching a DDL/DML result)
    sql.consume("select ...")      run a query to its end and keep nothing (the floor's scan)

`open_sql(target)` opens the target's runner; `drop_bench_schemas` clears the last run's schemas
on `cluster`, where the bench's tables outlive a run.

ThriftSql talks to the server directly rather than through python_hooks.warehouse.Warehouse (the dbt
adapter): the adapter closes its connection after every statement, so a temporary view would not
outlive the statement that creates it, and it polls a running statement once a second (the
profile's poll_interval), which would round every baseline statement up to whole seconds.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Protocol

log = logging.getLogger(__name__)

TARGETS = ("local", "cluster")


class TargetUnavailable(RuntimeError):
    """The target does not answer (the cluster is not up, or is on other ports)."""


class StatementFailed(RuntimeError):
    pass


class Sql(Protocol):
    target: str
    session_settings: dict[str, str]  # the bench's session only: not the settings dbt runs with

    def query(self, sql: str) -> list[tuple]: ...

    def execute(self, sql: str) -> None: ...

    def consume(self, sql: str) -> None: ...

    def close(self) -> None: ...


class LocalSql:
    """The embedded SparkSession. `consume` writes to Spark's `noop` sink: every row is produced,
    none is kept or sent to Python."""

    target = "local"
    session_settings: dict[str, str] = {}

    def __init__(self, spark) -> None:
        self.spark = spark

    def query(self, sql: str) -> list[tuple]:
        return [tuple(row) for row in self.spark.sql(sql).collect()]

    def execute(self, sql: str) -> None:
        self.spark.sql(sql)  # commands (DDL, DML, CALL) run when the statement is planned

    def consume(self, sql: str) -> None:
        self.spark.sql(sql).write.format("noop").mode("overwrite").save()

    def close(self) -> None:
        pass  # the session belongs to dbt-spark


class ThriftSql:
    """One session on the Spark Thrift Server. Statements run asynchronously and are polled every
    POLL_SECONDS (a synchronous Thrift call may be dropped by the server after minutes).

    Iceberg's catalog caches a table per session and does not see another session's commits until
    the cache entry expires (30 s): dbt writes through sessions of its own, so this session opens
    with the cache off, and every read sees the table's latest commit, as on `local` (where dbt and
    the bench share one session)."""

    target = "cluster"
    POLL_SECONDS = 0.05
    session_settings = {"spark.sql.catalog.spark_catalog.cache-enabled": "false"}

    def __init__(self, connection, endpoint: str) -> None:
        self._connection = connection
        self._cursor = connection.cursor()
        self.endpoint = endpoint

    @classmethod
    def connect(cls, environ=os.environ) -> ThriftSql:
        """The Thrift Server the profile's `cluster` target uses: CDC_THRIFT_HOST, CDC_THRIFT_PORT,
        CDC_THRIFT_USER, with the profile's defaults."""
        from pyhive import hive

        from python_hooks.cluster.config import HOST, PORTS

        logging.getLogger("pyhive").setLevel(logging.WARNING)
        host = environ.get("CDC_THRIFT_HOST") or HOST
        port = int(environ.get("CDC_THRIFT_PORT") or PORTS["CDC_THRIFT_PORT"])
        user = environ.get("CDC_THRIFT_USER") or environ.get("USER") or "cdc"
        endpoint = f"{host}:{port}"
        try:
            connection = hive.connect(
                host=host,
                port=port,
                username=user,
                # Applied when the session opens, before PyHive's `USE default` loads the catalog.
                configuration={f"set:hiveconf:{k}": v for k, v in cls.session_settings.items()},
            )
        except Exception as error:  # noqa: BLE001 - thrift raises several kinds for "nobody there"
            raise TargetUnavailable(
                f"BENCH_TARGET=cluster: no Spark Thrift Server answers on {endpoint} ({error}). "
                "Start the cluster with `make cluster-up`, with the same CDC_THRIFT_PORT."
            ) from error
        sql = cls(connection, endpoint)
        for key, value in cls.session_settings.items():
            # A `set` statement would come too late: the catalog is loaded by then.
            if sql.query(f"set `{key}`") != [(key, value)]:
                raise StatementFailed(f"the Thrift session at {endpoint} did not take {key}={value}")
        return sql

    def _run(self, sql: str) -> None:
        from pyhive.hive import ttypes

        pending = (
            ttypes.TOperationState.INITIALIZED_STATE,
            ttypes.TOperationState.PENDING_STATE,
            ttypes.TOperationState.RUNNING_STATE,
        )
        self._cursor.execute(sql, async_=True)
        status = self._cursor.poll(get_progress_update=False)
        while status.operationState in pending:
            time.sleep(self.POLL_SECONDS)
            status = self._cursor.poll(get_progress_update=False)
        if status.errorMessage or status.operationState != ttypes.TOperationState.FINISHED_STATE:
            state = ttypes.TOperationState._VALUES_TO_NAMES.get(status.operationState, status.operationState)
            raise StatementFailed(f"{status.errorMessage or state} in:\n{sql}")

    def query(self, sql: str) -> list[tuple]:
        self._run(sql)
        return [tuple(row) for row in self._cursor.fetchall()]

    def execute(self, sql: str) -> None:
        self._run(sql)

    def consume(self, sql: str) -> None:
        """No `noop` sink through SQL: hash every row and add the hashes up, one row comes back.
        (Not count(*): Iceberg answers a count from its metadata when there are no delete files.)"""
        self.query(f"select sum(xxhash64(*)) from ({sql}) as consumed")

    def close(self) -> None:
        try:
            self._connection.close()
        except Exception:  # noqa: BLE001 - the server may have gone already
            log.debug("closing the Thrift session failed", exc_info=True)


def open_sql(target: str) -> Sql:
    """`local`: the SparkSession dbt-spark created from the profile (or the one already running in
    this process, a test's). `cluster`: a session of the Thrift Server."""
    if target == "cluster":
        return ThriftSql.connect()
    from pyspark.sql import SparkSession

    return LocalSql(SparkSession.getActiveSession() or SparkSession.builder.getOrCreate())


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


def quote_path(path) -> str:
    """A path as a backtick-quoted identifier: parquet.`<path>`."""
    return "`" + str(path).replace("`", "``") + "`"


def string_literal(value) -> str:
    return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"


def columns(sql: Sql, relation: str) -> list[str]:
    """Column names of a table, in order (DESCRIBE stops at the blank line before partitioning)."""
    names = []
    for name, *_ in sql.query(f"describe table {relation}"):
        if not name or name.startswith("#"):
            break
        names.append(name)
    return names
