"""Where a run keeps its raw files and tables (BENCH_STORAGE): this machine's disk, or S3.

local  the landing zone in BENCH_WORK/landing, the warehouse in BENCH_WORK/warehouse (on the `local`
       target; the cluster's own warehouse on `cluster`).
s3     both on a local S3 server that the bench starts for the run and stops at its end, also when the
       run fails (python_hooks/objectstore/: SeaweedFS's `weed mini`): data in BENCH_WORK/s3, on free
       ports, one bucket (`cdc-bench`) holding `landing/`, `warehouse/` and `scratch/` (the floor's
       output). Its own server rather than a running `make s3-up`: a run starts from an empty bucket
       (the bench empties its work at every run, which it must never do to a bucket someone else uses),
       the full scale's gigabytes go to BENCH_WORK and not the project's data/s3, and two runs never
       share a server. The Derby metastore, the lock and the hooks' state stay on this disk, in
       BENCH_WORK/state (CDC_STATE_DIR).

The generated raw files are written to BENCH_WORK/outbox and then landed: moved into the landing
folder on `local`, uploaded (one PUT each) and removed from the outbox on `s3`, as a producer's upload
would; landing is never timed. Spark, dbt, the hooks, the hand-written jobs and the stock model all
read the landed files where they are, and write their tables to the one warehouse.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from python_hooks.objectstore import config_from_env, down, free_port, up
from python_hooks.project import env
from python_hooks.project.object_store import running_server, shell_variables
from python_hooks.project.storage import Location

log = logging.getLogger(__name__)

STORAGES = ("local", "s3")
BUCKET = "cdc-bench"
# The standard AWS variables (python_hooks/project/object_store.py): the bench's server replaces yours.
AWS_VARIABLES = (
    "AWS_ENDPOINT_URL_S3",
    "AWS_ENDPOINT_URL",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_REGION",
    "CDC_S3_BUCKET",
)


@dataclass(frozen=True)
class BenchStorage:
    """Where one run's files are: `landing` (CDC_LANDING_ROOT), `warehouse` (CDC_WAREHOUSE; None when
    the target's own), `scratch` (what the floor writes and deletes), and on `s3` the server's endpoint
    and bucket."""

    kind: str
    landing: Location
    scratch: Location
    warehouse: str | None = None
    endpoint: str | None = None
    bucket: str | None = None

    def as_dict(self) -> dict:
        return {
            "kind": self.kind,
            "landing": str(self.landing),
            "warehouse": self.warehouse,
            "endpoint": self.endpoint,
            "bucket": self.bucket,
            "server": "SeaweedFS (weed mini) on this machine, started by the bench" if self.kind == "s3" else None,
        }


def local_storage(work: Path, warehouse: Path | None = None) -> BenchStorage:
    """Everything in the work folder (the warehouse too, when given: the `local` target's)."""
    return BenchStorage(
        "local",
        Location.parse(work / "landing"),
        Location.parse(work / "scratch"),
        str(warehouse) if warehouse else None,
    )


def _server_config(work: Path, port: int | None = None):
    environ = {"CDC_S3_DIR": str(work / "s3"), "CDC_S3_BUCKET": BUCKET}
    if port is not None:
        environ["CDC_S3_PORT"] = str(port)
    return config_from_env(environ)  # the development keys: no AWS_* of yours reaches this server


def stop_leftover(work: Path) -> None:
    """Stop the server of an earlier run in this work folder (one killed before its end) before the
    folder is emptied; nothing when none runs."""
    if (work / "s3").is_dir() and running_server({"CDC_S3_DIR": str(work / "s3")}):
        log.warning("an earlier run's S3 server still runs in %s: stopping it", work / "s3")
        down(_server_config(work))


def _own(values: dict[str, str]) -> None:
    """Set `values` in os.environ as the user's (not env.py's defaults, which apply_defaults() would
    decide again: CDC_STATE_DIR from the warehouse, the AWS variables from `make s3-up`'s server)."""
    for name in AWS_VARIABLES:
        os.environ.pop(name, None)
    os.environ.update(values)
    defaulted = [n for n in (os.environ.get(env.DEFAULTED) or "").split(",") if n and n not in values]
    if defaulted:
        os.environ[env.DEFAULTED] = ",".join(defaulted)
    else:
        os.environ.pop(env.DEFAULTED, None)


@contextlib.contextmanager
def s3(work: Path) -> Iterator[BenchStorage]:
    """A local S3 server in work/s3 on free ports, up for the `with` block, with CDC_WAREHOUSE, the
    standard AWS variables that reach it and CDC_STATE_DIR in os.environ (set before the Spark session
    starts: S3A and the warehouse are static settings); stopped afterwards, also on failure, and
    os.environ as it was."""
    config = _server_config(work, free_port())
    names = [*AWS_VARIABLES, "CDC_WAREHOUSE", "CDC_STATE_DIR", env.DEFAULTED]
    saved = {name: os.environ.get(name) for name in names}
    try:
        up(config)
        variables = dict(shell_variables({"CDC_S3_DIR": str(config.folder)}))
        if not variables:
            raise SystemExit(f"the bench's S3 server in {config.folder} does not run after starting it")
        warehouse = f"s3a://{BUCKET}/warehouse"
        _own(variables | {"CDC_WAREHOUSE": warehouse, "CDC_STATE_DIR": str(work / "state")})
        log.info("storage s3: SeaweedFS at %s, bucket %s (data in %s)", config.endpoint_url, BUCKET, config.data)
        yield BenchStorage(
            "s3",
            Location.parse(f"s3a://{BUCKET}/landing"),
            Location.parse(f"s3a://{BUCKET}/scratch"),
            warehouse,
            config.endpoint_url,
            BUCKET,
        )
    finally:
        down(config)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
