"""The metastore's private PostgreSQL: started, its database and Hive schema created, the lock
tables Iceberg's commit lock needs, and the locks held."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import zipfile

from python_hooks.cluster.config import (
    HOST,
    LOCK_TABLES_SQL,
    METASTORE_DB,
    POSTGRES_JDBC_JAR,
    STALE_LOCK_SECONDS,
    ClusterConfig,
    spark_home,
)
from python_hooks.cluster.processes import private_file
from python_hooks.project import postgres

log = logging.getLogger(__name__)


def psql(config: ClusterConfig, sql: str, database: str = "postgres") -> str:
    """Runs SQL as the PostgreSQL superuser over the private socket; returns its unaligned output."""
    return postgres.psql(config.postgres, sql, database)


def start_postgres(config: ClusterConfig) -> None:
    postgres.start(config.postgres)


def prepare_metastore(config: ClusterConfig, server_running: bool = True) -> None:
    """The metastore database and its lock tables; every statement is safe to run again.

    Locks are taken by the Thrift Server (Iceberg's commit lock) and heartbeated while it lives.
    A lock older than STALE_LOCK_SECONDS belongs to a process that died. When this machine's
    Thrift Server is not running (`up` is about to start it), every lock taken from this machine is
    an orphan too: a server killed in the middle of a commit leaves its lock, and Hive 2.3's
    metastore never expires it, so the next commit to that table would wait for it."""
    user = config.metastore_user
    if not psql(config, f"select 1 from pg_roles where rolname = '{user}'"):
        psql(config, f'create role "{user}" login')
    if not psql(config, f"select 1 from pg_database where datname = '{METASTORE_DB}'"):
        psql(config, f'create database {METASTORE_DB} owner "{user}"')
    psql(config, f'set role "{user}"; {LOCK_TABLES_SQL.read_text()}', database=METASTORE_DB)
    create_metastore_schema(config)
    host = socket.gethostname().split(".")[0].replace("'", "''")
    orphan = "" if server_running else f" or split_part(hl_host, '.', 1) = '{host}'"
    stale = psql(
        config,
        "delete from hive_locks where hl_last_heartbeat < "
        f"(extract(epoch from now()) - {STALE_LOCK_SECONDS}) * 1000{orphan} returning hl_lock_ext_id",
        database=METASTORE_DB,
    )
    if stale:
        log.warning("postgres: removed %d lock(s) left by a process that died", len(stale.splitlines()))


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
