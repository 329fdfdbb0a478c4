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

import logging
import shutil
import time
from pathlib import Path

from python_hooks.cluster.config import DEBIAN_PACKAGES, HOST, ClusterConfig
from python_hooks.cluster.metastore import lock_count, prepare_metastore, start_postgres
from python_hooks.cluster.processes import running_pid, stop_pid
from python_hooks.cluster.spark import alive_workers, start_master, start_thrift, start_worker
from python_hooks.project import env, postgres

log = logging.getLogger(__name__)


def up(config: ClusterConfig) -> None:
    started = time.monotonic()
    local_warehouse = [] if env.is_uri(config.warehouse) else [Path(config.warehouse)]
    for folder in (config.root, config.root / "logs", config.socket_dir, *local_warehouse):
        folder.mkdir(parents=True, exist_ok=True)
    for name, tool in DEBIAN_PACKAGES.items():
        if not (Path(tool).exists() or shutil.which(tool) or list(Path("/usr/lib/postgresql").glob(f"*/bin/{tool}"))):
            raise SystemExit(f"{name} is not installed: run `make cluster-packages`")
    start_postgres(config)
    prepare_metastore(config, server_running=running_pid(config, "thrift") is not None)
    start_master(config)
    start_worker(config)
    start_thrift(config)
    log.info(
        "cluster up in %.0f s: dbt target `cluster` at %s:%d, warehouse %s, logs %s",
        time.monotonic() - started,
        HOST,
        config.thrift_port,
        config.warehouse,
        config.root / "logs",
    )


def down(config: ClusterConfig) -> None:
    for part in ("thrift", "worker", "master"):
        stop_pid(config, part)
    postgres.stop(config.postgres)
    log.info("cluster down (%s)", config.root)


def status(config: ClusterConfig) -> bool:
    """Prints one line per part; True when every part runs."""
    lines = []
    for part, where in (
        ("postgres", f"{HOST}:{config.pg_port}"),
        ("master", config.master_url),
        ("worker", f"{alive_workers(config)} alive"),
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
