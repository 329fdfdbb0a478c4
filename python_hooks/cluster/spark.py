"""Spark on the shared target: the standalone master and worker, and the Thrift Server the
`cluster` dbt target connects to (Iceberg on spark_catalog, the metastore in PostgreSQL)."""

from __future__ import annotations

import json
import logging
import os
import shutil
import urllib.request
from pathlib import Path

from python_hooks.cluster.config import HOST, METASTORE_DB, POSTGRES_JDBC_JAR, ClusterConfig, spark_home
from python_hooks.cluster.metastore import metastore_properties, psql
from python_hooks.cluster.processes import ownership_marker, port_open, private_file, running_pid, spawn, wait_until
from python_hooks.project import env, object_store

log = logging.getLogger(__name__)


def spark_env(config: ClusterConfig) -> dict[str, str]:
    return {
        "SPARK_HOME": str(spark_home()),
        "SPARK_LOCAL_IP": HOST,
        "SPARK_DAEMON_JAVA_OPTS": ownership_marker(config),
        "SPARK_DAEMON_MEMORY": "512m",
        "SPARK_CONF_DIR": str(config.root / "conf"),
    }


def master_state(config: ClusterConfig) -> dict | None:
    url = f"http://{HOST}:{config.ports['CDC_SPARK_MASTER_UI_PORT']}/json/"
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return json.load(response)
    except (OSError, ValueError):
        return None


def alive_workers(config: ClusterConfig) -> int:
    state = master_state(config) or {}
    return sum(1 for worker in state.get("workers", []) if worker.get("state") == "ALIVE")


def start_master(config: ClusterConfig) -> None:
    if running_pid(config, "master"):
        log.info("master: already running at %s", config.master_url)
        return
    command = [str(spark_home() / "bin" / "spark-class"), "org.apache.spark.deploy.master.Master"]
    command += ["--host", HOST, "--port", str(config.ports["CDC_SPARK_MASTER_PORT"])]
    command += ["--webui-port", str(config.ports["CDC_SPARK_MASTER_UI_PORT"])]
    pid = spawn(config, "master", command, spark_env(config))
    wait_until(
        "the Spark master",
        lambda: master_state(config) is not None,
        120,
        config.log_file("master"),
        pid,
    )
    log.info("master: started at %s (pid %d)", config.master_url, pid)


def start_worker(config: ClusterConfig) -> None:
    if running_pid(config, "worker"):
        log.info("worker: already running")
        return
    work_dir = config.root / "worker"
    work_dir.mkdir(exist_ok=True)
    command = [str(spark_home() / "bin" / "spark-class"), "org.apache.spark.deploy.worker.Worker"]
    command += ["--host", HOST, "--cores", str(config.worker_cores), "--memory", config.worker_memory]
    command += ["--webui-port", str(config.ports["CDC_SPARK_WORKER_UI_PORT"]), "--work-dir", str(work_dir)]
    command.append(config.master_url)
    pid = spawn(config, "worker", command, spark_env(config))
    wait_until(
        "the Spark worker",
        lambda: alive_workers(config) > 0,
        120,
        config.log_file("worker"),
        pid,
    )
    log.info("worker: registered (%d cores, %s; pid %d)", config.worker_cores, config.worker_memory, pid)


def s3a_settings(environ) -> dict[str, str]:
    """Spark's S3A settings for the endpoint of the standard AWS variables (none: AWS itself)."""
    endpoint = object_store.endpoint_url(environ)
    if not endpoint:
        return {}
    return {"spark.hadoop.fs.s3a.endpoint": endpoint, "spark.hadoop.fs.s3a.path.style.access": "true"}


def thrift_settings(config: ClusterConfig, environ: os._Environ[str] | dict[str, str] = os.environ) -> dict[str, str]:
    """The Thrift Server's Spark settings: Iceberg on spark_catalog, the metastore in PostgreSQL,
    Iceberg's commit lock on (the default), commit retries raised for concurrent writers."""
    try:
        jars = ":".join(str(jar) for jar in env.spark_jars(environ))  # Iceberg, S3A (jars/pom.xml)
    except FileNotFoundError as error:
        raise SystemExit(str(error)) from error
    log4j = config.root / "conf" / "log4j2.properties"
    settings = {
        "spark.app.name": "cdc-lakehouse-thrift",
        "spark.master": config.master_url,
        "spark.driver.host": HOST,
        "spark.driver.bindAddress": HOST,
        "spark.driver.memory": config.driver_memory,
        "spark.driver.extraClassPath": f"{jars}:{POSTGRES_JDBC_JAR}",
        "spark.driver.extraJavaOptions": f"{ownership_marker(config)} -Dlog4j2.configurationFile=file:{log4j}",
        "spark.executor.extraClassPath": jars,
        "spark.executor.memory": config.executor_memory,
        "spark.cores.max": str(config.worker_cores),
        "spark.ui.port": str(config.ports["CDC_THRIFT_UI_PORT"]),
        "spark.ui.showConsoleProgress": "false",
        # Several sessions at once (the scheduler's run, analysts' queries): share the executors.
        "spark.scheduler.mode": "FAIR",
        # Each statement answers when it is done. dbt-spark sends statements asynchronously and,
        # when the first poll finds one still running, sleeps poll_interval (1 s at least) before
        # asking again: with ~30 short statements per batch, that was most of a batch's time.
        # Sessions still run side by side (one server thread each).
        "spark.sql.hive.thriftServer.async": "false",
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        "spark.sql.catalog.spark_catalog": "org.apache.iceberg.spark.SparkSessionCatalog",
        "spark.sql.catalog.spark_catalog.type": "hive",
        # Every session sees every other session's last commit: Iceberg's catalog cache would let a
        # session read a table as it was up to 30 s ago (an analyst after the scheduler's run).
        "spark.sql.catalog.spark_catalog.cache-enabled": "false",
        # Writers retry a commit that lost the race to a concurrent one (Iceberg's default: 4 times).
        "spark.sql.catalog.spark_catalog.table-default.commit.retry.num-retries": "20",
        "spark.sql.catalog.spark_catalog.table-default.commit.retry.min-wait-ms": "50",
        "spark.sql.warehouse.dir": config.warehouse,
        # s3a:// paths (a warehouse or landing folders on S3): the endpoint of the standard AWS variables
        # `cluster up` ran with, path-style for a server that is not AWS; the keys only from the
        # environment the master, worker and server inherit (S3A's default chain), never in this file.
        **s3a_settings(environ),
        **{f"spark.hadoop.{key}": value for key, value in metastore_properties(config, environ).items()},
        # The schema exists (create_metastore_schema); this only adds what a newer client may miss.
        "spark.hadoop.datanucleus.schema.autoCreateAll": "true",
        "spark.hadoop.hive.metastore.schema.verification": "false",
        # An Iceberg table's schema is Iceberg's to check (profiles/profiles.yml says why).
        "spark.hadoop.hive.metastore.disallow.incompatible.col.type.changes": "false",
        # Iceberg's commit lock heartbeats well within STALE_LOCK_SECONDS.
        "spark.hadoop.iceberg.hive.lock-heartbeat-interval-ms": "30000",
        "spark.sql.parquet.mergeSchema": "true",
        # Raw files are never Spark 2's or legacy Hive's: ancient timestamps and dates are read as written.
        "spark.sql.parquet.datetimeRebaseModeInRead": "CORRECTED",
        "spark.sql.parquet.int96RebaseModeInRead": "CORRECTED",
        # Staging reads its folders through Parquet catalog tables (macros/cdc/landing.sql:
        # cdc_landing_raw_table): a session lists them at every statement, never once per session.
        "spark.sql.filesourceTableRelationCacheSize": "0",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": environ.get("CDC_SHUFFLE_PARTITIONS") or "4",
        "spark.sql.adaptive.enabled": "true",
        "spark.sql.adaptive.coalescePartitions.enabled": "true",
        # One driver for every session: the classes it generates kept for 2,000 plans, not 100 (profiles/profiles.yml).
        "spark.sql.codegen.cache.maxEntries": "2000",
        # A large table's MERGE: a shuffle join with a bloom filter on the table's side (profiles/profiles.yml).
        "spark.sql.adaptive.autoBroadcastJoinThreshold": "10MB",
        "spark.sql.optimizer.runtime.bloomFilter.applicationSideScanSizeThreshold": "32MB",
        "spark.default.parallelism": str(config.worker_cores),
    }
    return settings


def write_conf(config: ClusterConfig) -> Path:
    """spark-defaults.conf of the Thrift Server, readable by its owner only (it may hold the
    metastore password, which therefore never appears on a command line)."""
    conf_dir = config.root / "conf"
    conf_dir.mkdir(exist_ok=True)
    shutil.copyfile(env.PROJECT_ROOT / "profiles" / "log4j2-cluster.properties", conf_dir / "log4j2.properties")
    path = conf_dir / "spark-thrift.conf"
    private_file(path, "".join(f"{k} {v}\n" for k, v in thrift_settings(config).items()))
    return path


# The first start runs, in one session, one statement of each kind the project sends before anyone
# else connects: a smoke test of the catalog, and whatever DataNucleus still creates on first use
# (its sequence table) is created by one session, not by several at once.
WARM_UP = [
    "create database if not exists cdc_cluster_warm_up",
    "create table cdc_cluster_warm_up.iceberg_table (id bigint, part string) using iceberg partitioned by (part)"
    " tblproperties ('format-version' = '2')",
    "insert into cdc_cluster_warm_up.iceberg_table values (1, 'a')",
    "alter table cdc_cluster_warm_up.iceberg_table add column note string comment 'a comment'",
    "alter table cdc_cluster_warm_up.iceberg_table set tblproperties ('cdc.warm_up' = 'true')",
    "create table cdc_cluster_warm_up.listing (path string, modificationTime timestamp, length bigint,"
    " content binary) using binaryFile location '{folder}'",
    "refresh table cdc_cluster_warm_up.listing",
    "create table cdc_cluster_warm_up.parquet_table (id bigint, part string) using parquet partitioned by (part)",
    "insert into cdc_cluster_warm_up.parquet_table values (1, 'a')",
    "analyze table cdc_cluster_warm_up.parquet_table compute statistics for columns id",
    "create view cdc_cluster_warm_up.a_view comment 'a view' as select * from cdc_cluster_warm_up.iceberg_table",
    "show user functions",
    "drop view cdc_cluster_warm_up.a_view",
    "drop table cdc_cluster_warm_up.parquet_table",
    "drop table cdc_cluster_warm_up.listing",
    "drop table cdc_cluster_warm_up.iceberg_table purge",
    "drop database cdc_cluster_warm_up cascade",
]


def thrift_connection(config: ClusterConfig):
    from pyhive import hive

    logging.getLogger("pyhive").setLevel(logging.WARNING)
    return hive.connect(host=HOST, port=config.thrift_port, username=os.environ.get("USER", "cdc"))


def warm_up(config: ClusterConfig) -> None:
    marker = config.root / "run" / "metastore-ready"
    if marker.exists():
        return
    folder = config.root / "warm-up"
    folder.mkdir(exist_ok=True)
    connection = thrift_connection(config)
    try:
        cursor = connection.cursor()
        for statement in WARM_UP:
            cursor.execute(statement.format(folder=folder))
    finally:
        connection.close()
    tables = psql(config, "select count(*) from pg_tables where schemaname = 'public'", database=METASTORE_DB)
    marker.write_text(f"{tables} tables\n")
    log.info("thrift: catalog checked (create, write, alter, drop; %s metastore tables)", tables)


def thrift_answers(config: ClusterConfig) -> bool:
    """True once the Thrift Server runs a query."""
    if not port_open(config.thrift_port):
        return False
    try:
        connection = thrift_connection(config)
        try:
            cursor = connection.cursor()
            cursor.execute("select 1")
            return cursor.fetchall() == [(1,)]
        finally:
            connection.close()
    except Exception:  # noqa: BLE001 - not up yet, whatever the reason
        return False


def start_thrift(config: ClusterConfig) -> None:
    if running_pid(config, "thrift"):
        log.info("thrift: already running on %s:%d", HOST, config.thrift_port)
        return
    if port_open(config.thrift_port):
        raise SystemExit(f"port {config.thrift_port} is taken by another process: set CDC_THRIFT_PORT")
    conf = write_conf(config)
    command = [str(spark_home() / "bin" / "spark-submit"), "--properties-file", str(conf)]
    command += ["--class", "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2"]
    command += ["--hiveconf", f"hive.server2.thrift.bind.host={HOST}"]
    command += ["--hiveconf", f"hive.server2.thrift.port={config.thrift_port}"]
    command.append("spark-internal")
    pid = spawn(config, "thrift", command, spark_env(config))
    log.info("thrift: starting (pid %d), about a minute", pid)
    wait_until(
        "the Spark Thrift Server",
        lambda: thrift_answers(config),
        300,
        config.log_file("thrift"),
        pid,
    )
    warm_up(config)
    log.info("thrift: answering on %s:%d", HOST, config.thrift_port)
