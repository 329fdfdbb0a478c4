"""The shared target on one machine: `make cluster-up`, `make cluster-down`, `make cluster-status`.

Brings up, bound to 127.0.0.1, what a team shares instead of the embedded Derby metastore:

1. postgres  a private PostgreSQL cluster holding the Hive metastore database, with the tables
             Hive's lock manager needs (Iceberg's commit lock: metastore_locks.sql);
2. master    a Spark standalone master;
3. worker    one Spark worker;
4. thrift    the Spark Thrift Server (the `cluster` dbt target connects to it), running its jobs
             on the worker, with Iceberg on `spark_catalog` and the metastore in PostgreSQL.

Everything it writes (data, logs, PID files, the Thrift Server's Spark settings) goes under
$CDC_CLUSTER_DIR (default data/cluster). Ports come from environment variables (PORTS below) with
defaults away from the standard ones. `up` starts only what is not running and waits until each
part answers; `down` stops exactly the processes it started, by PID, newest first.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from python_hooks import env

log = logging.getLogger(__name__)

# Environment variable -> default port. The standard ones are 5432, 7077, 8080, 8081, 10000, 4040.
PORTS = {
    "CDC_PG_PORT": 15432,
    "CDC_SPARK_MASTER_PORT": 17077,
    "CDC_SPARK_MASTER_UI_PORT": 18080,
    "CDC_SPARK_WORKER_UI_PORT": 18081,
    "CDC_THRIFT_PORT": 10009,
    "CDC_THRIFT_UI_PORT": 14040,
}
HOST = "127.0.0.1"
POSTGRES_JDBC_JAR = Path("/usr/share/java/postgresql.jar")
DEBIAN_PACKAGES = {"postgresql": "initdb", "libpostgresql-jdbc-java": str(POSTGRES_JDBC_JAR)}
METASTORE_DB = "metastore"
LOCK_TABLES_SQL = Path(__file__).with_name("metastore_locks.sql")
# A lock older than this (no heartbeat) belongs to a process that died holding it: Hive 2.3's
# embedded metastore never times locks out itself (only a standalone metastore's housekeeper does).
STALE_LOCK_SECONDS = 300


@dataclass(frozen=True)
class ClusterConfig:
    root: Path
    warehouse: Path
    ports: dict[str, int]
    worker_cores: int
    worker_memory: str
    driver_memory: str
    executor_memory: str
    metastore_user: str

    @property
    def pg_port(self) -> int:
        return self.ports["CDC_PG_PORT"]

    @property
    def master_url(self) -> str:
        return f"spark://{HOST}:{self.ports['CDC_SPARK_MASTER_PORT']}"

    @property
    def thrift_port(self) -> int:
        return self.ports["CDC_THRIFT_PORT"]

    @property
    def pgdata(self) -> Path:
        return self.root / "postgres"

    @property
    def socket_dir(self) -> Path:
        return self.root / "run"

    def log_file(self, part: str) -> Path:
        return self.root / "logs" / f"{part}.log"

    def pid_file(self, part: str) -> Path:
        return self.root / "run" / f"{part}.pid"


def config_from_env(environ: os._Environ[str] | dict[str, str] = os.environ) -> ClusterConfig:
    env.apply_defaults(environ)
    root = Path(environ.get("CDC_CLUSTER_DIR") or env.PROJECT_ROOT / "data" / "cluster").resolve()
    ports = {}
    for name, default in PORTS.items():
        value = environ.get(name) or str(default)
        if not value.isdigit():
            raise SystemExit(f"{name}={value!r} is not a port number")
        ports[name] = int(value)
    return ClusterConfig(
        root=root,
        warehouse=Path(environ["CDC_WAREHOUSE"]),
        ports=ports,
        worker_cores=int(environ.get("CDC_WORKER_CORES") or os.cpu_count() or 2),
        worker_memory=environ.get("CDC_WORKER_MEMORY") or "6g",
        driver_memory=environ.get("CDC_THRIFT_DRIVER_MEMORY") or "3g",
        executor_memory=environ.get("CDC_EXECUTOR_MEMORY") or "4g",
        metastore_user=environ.get("CDC_METASTORE_USER") or "hive",
    )


# ---------------------------------------------------------------- processes and PID files


def _marker(config: ClusterConfig) -> str:
    """In every JVM's command line: tells our processes from anyone else's with the same PID."""
    return f"-Dcdc.cluster.dir={config.root}"


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def running_pid(config: ClusterConfig, part: str) -> int | None:
    """The PID of `part` if the process in its PID file is alive and is ours."""
    try:
        pid = int(config.pid_file(part).read_text().strip())
    except (OSError, ValueError):
        return None
    expected = str(config.pgdata) if part == "postgres" else _marker(config)
    return pid if expected in _cmdline(pid) else None


def _port_open(port: int) -> bool:
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.settimeout(1)
        return sock.connect_ex((HOST, port)) == 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def _wait(what: str, ready: Callable[[], bool], seconds: float, log_file: Path, pid: int) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if ready():
            return
        if not _alive(pid):
            raise SystemExit(f"{what} stopped while starting: see {log_file}")
        time.sleep(1)
    raise SystemExit(f"{what} did not answer within {seconds:.0f} s: see {log_file}")


def _spawn(config: ClusterConfig, part: str, command: list[str], extra_env: dict[str, str]) -> int:
    log_file = config.log_file(part)
    with log_file.open("ab") as out:
        out.write(f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')} starting: {' '.join(command)}\n".encode())
        out.flush()
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **extra_env},
            start_new_session=True,  # a Ctrl-C in the shell that ran `make cluster-up` does not stop it
        )
    config.pid_file(part).write_text(f"{process.pid}\n")
    return process.pid


# ---------------------------------------------------------------- PostgreSQL


def _as_postgres(command: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: as root, run it as the `postgres` user."""
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


def _pg_bin(name: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    versions = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"))
    if not versions:
        raise SystemExit(f"PostgreSQL's {name} not found: run `make cluster-packages` (Debian: postgresql)")
    return str(versions[-1])


def psql(config: ClusterConfig, sql: str, database: str = "postgres") -> str:
    """Runs SQL as the PostgreSQL superuser over the private socket; returns its unaligned output."""
    command = [_pg_bin("psql"), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1"]
    command += ["-h", str(config.socket_dir), "-p", str(config.pg_port), "-d", database, "-c", sql]
    result = subprocess.run(_as_postgres(command), capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise SystemExit(f"psql on {database} failed: {result.stderr.strip()}")
    return result.stdout.strip()


def _start_postgres(config: ClusterConfig) -> None:
    if running_pid(config, "postgres"):
        log.info("postgres: already running on %s:%d", HOST, config.pg_port)
        return
    if _port_open(config.pg_port):
        raise SystemExit(f"port {config.pg_port} is taken by another process: set CDC_PG_PORT")
    owner = ["chown", "-R", "postgres:postgres"] if os.geteuid() == 0 else None
    if not (config.pgdata / "PG_VERSION").exists():
        config.pgdata.mkdir(parents=True, exist_ok=True)
        if owner:
            subprocess.run([*owner, str(config.pgdata)], check=True)
        subprocess.run(
            _as_postgres([_pg_bin("initdb"), "--auth=trust", "--username=postgres", "-D", str(config.pgdata)]),
            check=True,
            stdout=config.log_file("postgres").open("ab"),
            stderr=subprocess.STDOUT,
        )
    if owner:
        subprocess.run([*owner, str(config.socket_dir)], check=True)
        subprocess.run([*owner, str(config.log_file("postgres"))], check=True)
    options = f"-c listen_addresses={HOST} -p {config.pg_port} -k {config.socket_dir}"
    subprocess.run(
        _as_postgres(
            [_pg_bin("pg_ctl"), "start", "-w", "-t", "60", "-D", str(config.pgdata), "-o", options]
            + ["-l", str(config.log_file("postgres"))]
        ),
        check=True,
        stdout=subprocess.DEVNULL,
    )
    # pg_ctl leaves postmaster.pid; its first line is the server's PID.
    pid = (config.pgdata / "postmaster.pid").read_text().splitlines()[0]
    config.pid_file("postgres").write_text(f"{pid}\n")
    log.info("postgres: started on %s:%d (pid %s)", HOST, config.pg_port, pid)


def _prepare_metastore(config: ClusterConfig) -> None:
    """The metastore database and its lock tables; every statement is safe to run again."""
    user = config.metastore_user
    if not psql(config, f"select 1 from pg_roles where rolname = '{user}'"):
        psql(config, f'create role "{user}" login')
    if not psql(config, f"select 1 from pg_database where datname = '{METASTORE_DB}'"):
        psql(config, f'create database {METASTORE_DB} owner "{user}"')
    psql(config, f'set role "{user}"; {LOCK_TABLES_SQL.read_text()}', database=METASTORE_DB)
    _create_metastore_schema(config)
    stale = psql(
        config,
        "delete from hive_locks where hl_last_heartbeat < "
        f"(extract(epoch from now()) - {STALE_LOCK_SECONDS}) * 1000 returning hl_lock_ext_id",
        database=METASTORE_DB,
    )
    if stale:
        log.warning("postgres: removed %d stale lock(s) left by a process that died", len(stale.splitlines()))


def _metastore_properties(
    config: ClusterConfig, environ: os._Environ[str] | dict[str, str] = os.environ
) -> dict[str, str]:
    properties = {
        "javax.jdo.option.ConnectionURL": f"jdbc:postgresql://{HOST}:{config.pg_port}/{METASTORE_DB}",
        "javax.jdo.option.ConnectionDriverName": "org.postgresql.Driver",
        "javax.jdo.option.ConnectionUserName": config.metastore_user,
    }
    if environ.get("CDC_METASTORE_PASSWORD"):
        properties["javax.jdo.option.ConnectionPassword"] = environ["CDC_METASTORE_PASSWORD"]
    return properties


def _private_file(path: Path, text: str) -> None:
    """Written readable by its owner only: it may hold the metastore password."""
    path.touch(mode=0o600)
    path.chmod(0o600)
    path.write_text(text, encoding="utf-8")


def _create_metastore_schema(config: ClusterConfig) -> None:
    """The Hive metastore's tables, created at once by DataNucleus' SchemaTool from Hive's own JDO
    mapping (package.jdo), the mapping `datanucleus.schema.autoCreateAll` would use. Left to
    autoCreateAll, they are created lazily, on first use, and the first CREATE TABLE deadlocks in
    PostgreSQL: its transaction holds TBLS while DataNucleus, on another connection, adds TBL_PRIVS'
    foreign key to TBLS (HiveRunner/HiveRunner#50 describes the same deadlock)."""
    if psql(config, "select 1 from pg_tables where tablename = 'DBS'", database=METASTORE_DB):
        return
    jars = spark_home() / "jars"
    work = config.root / "conf"
    work.mkdir(exist_ok=True)
    with zipfile.ZipFile(next(jars.glob("hive-metastore-*.jar"))) as jar:
        (work / "package.jdo").write_bytes(jar.read("package.jdo"))
    properties = {
        **_metastore_properties(config),
        "javax.jdo.PersistenceManagerFactoryClass": "org.datanucleus.api.jdo.JDOPersistenceManagerFactory",
        "datanucleus.storeManagerType": "rdbms",
        # Hive's own settings for its metastore (HiveConf defaults): the same table and column names.
        "datanucleus.identifierFactory": "datanucleus1",
        "datanucleus.rdbms.useLegacyNativeValueStrategy": "true",
    }
    _private_file(work / "metastore-schema.properties", "".join(f"{k}={v}\n" for k, v in properties.items()))
    command = ["java", "-cp", f"{jars}/*:{POSTGRES_JDBC_JAR}", "org.datanucleus.store.schema.SchemaTool"]
    command += [
        "-create",
        "-api",
        "JDO",
        "-props",
        str(work / "metastore-schema.properties"),
        str(work / "package.jdo"),
    ]
    with config.log_file("metastore-schema").open("ab") as out:
        result = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, check=False)
    if result.returncode != 0 or not psql(
        config, "select 1 from pg_tables where tablename = 'DBS'", database=METASTORE_DB
    ):
        raise SystemExit(f"creating the metastore schema failed: see {config.log_file('metastore-schema')}")
    log.info("postgres: metastore schema created")


def lock_count(config: ClusterConfig) -> int:
    return int(psql(config, "select count(*) from hive_locks", database=METASTORE_DB) or 0)


# ---------------------------------------------------------------- Spark


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def _spark_env(config: ClusterConfig) -> dict[str, str]:
    return {
        "SPARK_HOME": str(spark_home()),
        "SPARK_LOCAL_IP": HOST,
        "SPARK_DAEMON_JAVA_OPTS": _marker(config),
        "SPARK_DAEMON_MEMORY": "512m",
        "SPARK_CONF_DIR": str(config.root / "conf"),
    }


def _master_state(config: ClusterConfig) -> dict | None:
    url = f"http://{HOST}:{config.ports['CDC_SPARK_MASTER_UI_PORT']}/json/"
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return json.load(response)
    except (OSError, ValueError):
        return None


def _alive_workers(config: ClusterConfig) -> int:
    state = _master_state(config) or {}
    return sum(1 for worker in state.get("workers", []) if worker.get("state") == "ALIVE")


def _start_master(config: ClusterConfig) -> None:
    if running_pid(config, "master"):
        log.info("master: already running at %s", config.master_url)
        return
    command = [str(spark_home() / "bin" / "spark-class"), "org.apache.spark.deploy.master.Master"]
    command += ["--host", HOST, "--port", str(config.ports["CDC_SPARK_MASTER_PORT"])]
    command += ["--webui-port", str(config.ports["CDC_SPARK_MASTER_UI_PORT"])]
    pid = _spawn(config, "master", command, _spark_env(config))
    _wait(
        "the Spark master",
        lambda: _master_state(config) is not None,
        120,
        config.log_file("master"),
        pid,
    )
    log.info("master: started at %s (pid %d)", config.master_url, pid)


def _start_worker(config: ClusterConfig) -> None:
    if running_pid(config, "worker"):
        log.info("worker: already running")
        return
    work_dir = config.root / "worker"
    work_dir.mkdir(exist_ok=True)
    command = [str(spark_home() / "bin" / "spark-class"), "org.apache.spark.deploy.worker.Worker"]
    command += ["--host", HOST, "--cores", str(config.worker_cores), "--memory", config.worker_memory]
    command += ["--webui-port", str(config.ports["CDC_SPARK_WORKER_UI_PORT"]), "--work-dir", str(work_dir)]
    command.append(config.master_url)
    pid = _spawn(config, "worker", command, _spark_env(config))
    _wait(
        "the Spark worker",
        lambda: _alive_workers(config) > 0,
        120,
        config.log_file("worker"),
        pid,
    )
    log.info("worker: registered (%d cores, %s; pid %d)", config.worker_cores, config.worker_memory, pid)


def thrift_settings(config: ClusterConfig, environ: os._Environ[str] | dict[str, str] = os.environ) -> dict[str, str]:
    """The Thrift Server's Spark settings: Iceberg on spark_catalog, the metastore in PostgreSQL,
    Iceberg's commit lock on (the default), commit retries raised for concurrent writers."""
    iceberg = env.find_iceberg_jar()
    log4j = config.root / "conf" / "log4j2.properties"
    settings = {
        "spark.app.name": "cdc-lakehouse-thrift",
        "spark.master": config.master_url,
        "spark.driver.host": HOST,
        "spark.driver.bindAddress": HOST,
        "spark.driver.memory": config.driver_memory,
        "spark.driver.extraClassPath": f"{iceberg}:{POSTGRES_JDBC_JAR}",
        "spark.driver.extraJavaOptions": f"{_marker(config)} -Dlog4j2.configurationFile=file:{log4j}",
        "spark.executor.extraClassPath": str(iceberg),
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
        "spark.sql.warehouse.dir": str(config.warehouse),
        **{f"spark.hadoop.{key}": value for key, value in _metastore_properties(config, environ).items()},
        # The schema exists (_create_metastore_schema); this only adds what a newer client may miss.
        "spark.hadoop.datanucleus.schema.autoCreateAll": "true",
        "spark.hadoop.hive.metastore.schema.verification": "false",
        # Iceberg's commit lock heartbeats well within STALE_LOCK_SECONDS.
        "spark.hadoop.iceberg.hive.lock-heartbeat-interval-ms": "30000",
        "spark.sql.parquet.mergeSchema": "true",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": environ.get("CDC_SHUFFLE_PARTITIONS") or "4",
        "spark.sql.adaptive.enabled": "true",
        "spark.sql.adaptive.coalescePartitions.enabled": "true",
        "spark.default.parallelism": str(config.worker_cores),
    }
    return settings


def _write_conf(config: ClusterConfig) -> Path:
    """spark-defaults.conf of the Thrift Server, readable by its owner only (it may hold the
    metastore password, which therefore never appears on a command line)."""
    conf_dir = config.root / "conf"
    conf_dir.mkdir(exist_ok=True)
    shutil.copyfile(env.PROJECT_ROOT / "profiles" / "log4j2-cluster.properties", conf_dir / "log4j2.properties")
    path = conf_dir / "spark-thrift.conf"
    _private_file(path, "".join(f"{k} {v}\n" for k, v in thrift_settings(config).items()))
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


def _thrift_connection(config: ClusterConfig):
    from pyhive import hive

    logging.getLogger("pyhive").setLevel(logging.WARNING)
    return hive.connect(host=HOST, port=config.thrift_port, username=os.environ.get("USER", "cdc"))


def _warm_up(config: ClusterConfig) -> None:
    marker = config.root / "run" / "metastore-ready"
    if marker.exists():
        return
    folder = config.root / "warm-up"
    folder.mkdir(exist_ok=True)
    connection = _thrift_connection(config)
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
    if not _port_open(config.thrift_port):
        return False
    try:
        connection = _thrift_connection(config)
        try:
            cursor = connection.cursor()
            cursor.execute("select 1")
            return cursor.fetchall() == [(1,)]
        finally:
            connection.close()
    except Exception:  # noqa: BLE001 - not up yet, whatever the reason
        return False


def _start_thrift(config: ClusterConfig) -> None:
    if running_pid(config, "thrift"):
        log.info("thrift: already running on %s:%d", HOST, config.thrift_port)
        return
    if _port_open(config.thrift_port):
        raise SystemExit(f"port {config.thrift_port} is taken by another process: set CDC_THRIFT_PORT")
    conf = _write_conf(config)
    command = [str(spark_home() / "bin" / "spark-submit"), "--properties-file", str(conf)]
    command += ["--class", "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2"]
    command += ["--hiveconf", f"hive.server2.thrift.bind.host={HOST}"]
    command += ["--hiveconf", f"hive.server2.thrift.port={config.thrift_port}"]
    command.append("spark-internal")
    pid = _spawn(config, "thrift", command, _spark_env(config))
    log.info("thrift: starting (pid %d), about a minute", pid)
    _wait(
        "the Spark Thrift Server",
        lambda: thrift_answers(config),
        300,
        config.log_file("thrift"),
        pid,
    )
    _warm_up(config)
    log.info("thrift: answering on %s:%d", HOST, config.thrift_port)


# ---------------------------------------------------------------- commands


def up(config: ClusterConfig) -> None:
    started = time.monotonic()
    for folder in (config.root, config.root / "logs", config.socket_dir, config.warehouse):
        folder.mkdir(parents=True, exist_ok=True)
    for name, tool in DEBIAN_PACKAGES.items():
        if not (Path(tool).exists() or shutil.which(tool) or list(Path("/usr/lib/postgresql").glob(f"*/bin/{tool}"))):
            raise SystemExit(f"{name} is not installed: run `make cluster-packages`")
    _start_postgres(config)
    _prepare_metastore(config)
    _start_master(config)
    _start_worker(config)
    _start_thrift(config)
    log.info(
        "cluster up in %.0f s: dbt target `cluster` at %s:%d, warehouse %s, logs %s",
        time.monotonic() - started,
        HOST,
        config.thrift_port,
        config.warehouse,
        config.root / "logs",
    )


def _stop_pid(config: ClusterConfig, part: str, seconds: float = 60) -> None:
    pid = running_pid(config, part)
    if pid is None:
        config.pid_file(part).unlink(missing_ok=True)
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and running_pid(config, part):
        time.sleep(0.5)
    if running_pid(config, part):
        log.warning("%s (pid %d) did not stop within %.0f s: killed", part, pid, seconds)
        os.kill(pid, signal.SIGKILL)
    config.pid_file(part).unlink(missing_ok=True)
    log.info("%s: stopped (pid %d)", part, pid)


def down(config: ClusterConfig) -> None:
    for part in ("thrift", "worker", "master"):
        _stop_pid(config, part)
    if running_pid(config, "postgres"):
        subprocess.run(
            _as_postgres([_pg_bin("pg_ctl"), "stop", "-w", "-m", "fast", "-D", str(config.pgdata)]),
            check=False,
            stdout=subprocess.DEVNULL,
        )
        _stop_pid(config, "postgres", seconds=10)
    log.info("cluster down (%s)", config.root)


def status(config: ClusterConfig) -> bool:
    """Prints one line per part; True when every part runs."""
    lines = []
    for part, where in (
        ("postgres", f"{HOST}:{config.pg_port}"),
        ("master", config.master_url),
        ("worker", f"{_alive_workers(config)} alive"),
        ("thrift", f"{HOST}:{config.thrift_port}"),
    ):
        pid = running_pid(config, part)
        lines.append((part, f"running (pid {pid})" if pid else "stopped", where))
    all_up = all(state.startswith("running") for _, state, _ in lines)
    for part, state, where in lines:
        print(f"{part:<9} {state:<22} {where}")
    if running_pid(config, "postgres"):
        print(f"{'locks':<9} {lock_count(config)} held in the metastore")
    print(f"warehouse {config.warehouse}\nlogs      {config.root / 'logs'}")
    return all_up
