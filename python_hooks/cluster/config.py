"""The shared target's settings: ports, folders, memory, from CDC_* environment variables
(docs/cluster.md), and where Spark is."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from python_hooks.project import env
from python_hooks.project.postgres import PrivatePostgres

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
    warehouse: str  # a folder, or s3a://<bucket>/<prefix>
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

    @property
    def postgres(self) -> PrivatePostgres:
        """The metastore's server (python_hooks/project/postgres.py starts and stops it)."""
        return PrivatePostgres(
            name="postgres",
            pgdata=self.pgdata,
            port=self.pg_port,
            socket_dir=self.socket_dir,
            log_file=self.log_file("postgres"),
            pid_file=self.pid_file("postgres"),
            port_variable="CDC_PG_PORT",
            folder_variable="CDC_CLUSTER_DIR",
        )

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
        warehouse=environ["CDC_WAREHOUSE"],
        ports=ports,
        worker_cores=int(environ.get("CDC_WORKER_CORES") or os.cpu_count() or 2),
        worker_memory=environ.get("CDC_WORKER_MEMORY") or "6g",
        driver_memory=environ.get("CDC_THRIFT_DRIVER_MEMORY") or "3g",
        executor_memory=environ.get("CDC_EXECUTOR_MEMORY") or "4g",
        metastore_user=environ.get("CDC_METASTORE_USER") or "hive",
    )


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent
