"""The metastore's private PostgreSQL: started, its database and Hive schema created, the lock
tables Iceberg's commit lock needs, and the locks held."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import zipfile
from pathlib import Path

from python_hooks.cluster.config import (
    HOST,
    LOCK_TABLES_SQL,
    METASTORE_DB,
    POSTGRES_JDBC_JAR,
    STALE_LOCK_SECONDS,
    ClusterConfig,
    spark_home,
)
from python_hooks.cluster.processes import port_open, private_file, running_pid

log = logging.getLogger(__name__)


def as_postgres(command: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: as root, run it as the `postgres` user."""
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


def pg_bin(name: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    versions = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"))
    if not versions:
        raise SystemExit(f"PostgreSQL's {name} not found: run `make cluster-packages` (Debian: postgresql)")
    return str(versions[-1])


def psql(config: ClusterConfig, sql: str, database: str = "postgres") -> str:
    """Runs SQL as the PostgreSQL superuser over the private socket; returns its unaligned output."""
    command = [pg_bin("psql"), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1"]
    command += ["-h", str(config.socket_dir), "-p", str(config.pg_port), "-d", database, "-c", sql]
    result = subprocess.run(as_postgres(command), capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise SystemExit(f"psql on {database} failed: {result.stderr.strip()}")
    return result.stdout.strip()


def start_postgres(config: ClusterConfig) -> None:
    if running_pid(config, "postgres"):
        log.info("postgres: already running on %s:%d", HOST, config.pg_port)
        return
    if port_open(config.pg_port):
        raise SystemExit(f"port {config.pg_port} is taken by another process: set CDC_PG_PORT")
    owner = ["chown", "-R", "postgres:postgres"] if os.geteuid() == 0 else None
    if not (config.pgdata / "PG_VERSION").exists():
        config.pgdata.mkdir(parents=True, exist_ok=True)
        if owner:
            subprocess.run([*owner, str(config.pgdata)], check=True)
        subprocess.run(
            as_postgres([pg_bin("initdb"), "--auth=trust", "--username=postgres", "-D", str(config.pgdata)]),
            check=True,
            stdout=config.log_file("postgres").open("ab"),
            stderr=subprocess.STDOUT,
        )
    if owner:
        subprocess.run([*owner, str(config.socket_dir)], check=True)
        subprocess.run([*owner, str(config.log_file("postgres"))], check=True)
    options = f"-c listen_addresses={HOST} -p {config.pg_port} -k {config.socket_dir}"
    subprocess.run(
        as_postgres(
            [pg_bin("pg_ctl"), "start", "-w", "-t", "60", "-D", str(config.pgdata), "-o", options]
            + ["-l", str(config.log_file("postgres"))]
        ),
        check=True,
        stdout=subprocess.DEVNULL,
    )
    # pg_ctl leaves postmaster.pid; its first line is the server's PID.
    pid = (config.pgdata / "postmaster.pid").read_text().splitlines()[0]
    config.pid_file("postgres").write_text(f"{pid}\n")
    log.info("postgres: started on %s:%d (pid %s)", HOST, config.pg_port, pid)


def prepare_metastore(config: ClusterConfig) -> None:
    """The metastore database and its lock tables; every statement is safe to run again."""
    user = config.metastore_user
    if not psql(config, f"select 1 from pg_roles where rolname = '{user}'"):
        psql(config, f'create role "{user}" login')
    if not psql(config, f"select 1 from pg_database where datname = '{METASTORE_DB}'"):
        psql(config, f'create database {METASTORE_DB} owner "{user}"')
    psql(config, f'set role "{user}"; {LOCK_TABLES_SQL.read_text()}', database=METASTORE_DB)
    create_metastore_schema(config)
    stale = psql(
        config,
        "delete from hive_locks where hl_last_heartbeat < "
        f"(extract(epoch from now()) - {STALE_LOCK_SECONDS}) * 1000 returning hl_lock_ext_id",
        database=METASTORE_DB,
    )
    if stale:
        log.warning("postgres: removed %d stale lock(s) left by a process that died", len(stale.splitlines()))


def metastore_properties(
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


def create_metastore_schema(config: ClusterConfig) -> None:
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
        **metastore_properties(config),
        "javax.jdo.PersistenceManagerFactoryClass": "org.datanucleus.api.jdo.JDOPersistenceManagerFactory",
        "datanucleus.storeManagerType": "rdbms",
        # Hive's own settings for its metastore (HiveConf defaults): the same table and column names.
        "datanucleus.identifierFactory": "datanucleus1",
        "datanucleus.rdbms.useLegacyNativeValueStrategy": "true",
    }
    private_file(work / "metastore-schema.properties", "".join(f"{k}={v}\n" for k, v in properties.items()))
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
