"""The shared target on this machine (`make cluster-up|down|status`): a private PostgreSQL metastore,
a Spark standalone master and worker, and the Thrift Server the `cluster` dbt target connects to.

    config     ports, folders and memory from CDC_* variables
    processes  PID files, start, wait, stop
    metastore  PostgreSQL, the Hive metastore schema, its lock tables
    spark      master, worker, Thrift Server
    launcher   up, down, status
"""

from python_hooks.cluster.config import HOST, PORTS, POSTGRES_JDBC_JAR, ClusterConfig, config_from_env
from python_hooks.cluster.launcher import down, status, up
from python_hooks.cluster.metastore import lock_count, psql
from python_hooks.cluster.spark import thrift_answers, thrift_settings

__all__ = [
    "HOST",
    "PORTS",
    "POSTGRES_JDBC_JAR",
    "ClusterConfig",
    "config_from_env",
    "down",
    "lock_count",
    "psql",
    "status",
    "thrift_answers",
    "thrift_settings",
    "up",
]
