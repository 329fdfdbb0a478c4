"""`python -m python_hooks jvm-classes` (`make install` runs it): the embedded driver JVM's class archive
(python_hooks/project/jvm_classes.py).

A JVM of the profile's settings, in a warehouse of its own in a temporary folder, runs what a batch runs
(Parquet written and read, an Iceberg table created, appended to, merged into and read with a window, a
cached query, the Derby metastore asked), then exits, and Java writes every class it loaded from the class
path into the archive. It is written beside the archive and put in its place only when complete and when a
JVM starts with it: Java cannot read a truncated archive (it stops with SIGBUS), so a reader never sees one.
Classes loaded from `spark.jars` (Iceberg, S3A) come from Spark's own class loader, which Java does not
archive: they load from their jars as before.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from python_hooks.project import env, jvm_classes

log = logging.getLogger("python_hooks")

# What a batch runs, small: each statement loads the classes of its kind of work.
TRAINING = [
    "create schema if not exists {schema}",
    "insert overwrite directory '{raw}' using parquet select id, cast(id % 97 as string) as name, "
    "if(id % 10 = 0, 'D', 'U') as op, timestamp'2026-01-01 00:00:00' + make_interval(0, 0, 0, 0, 0, 0, id) as ts "
    "from range(2000)",
    "create table {schema}.training (id bigint, name string, op string, ts timestamp) using iceberg "
    "tblproperties ('format-version' = '2', 'write.delete.mode' = 'merge-on-read', "
    "'write.update.mode' = 'merge-on-read', 'write.merge.mode' = 'merge-on-read')",
    "insert into {schema}.training select * from parquet.`{raw}` where id < 1000",
    "cache table training_batch as select *, row_number() over (partition by id order by ts desc) as rank "
    "from parquet.`{raw}`",
    "merge into {schema}.training as t using (select * from training_batch where rank = 1) as s on t.id = s.id "
    "when matched and s.op = 'D' then delete when matched and s.ts > t.ts then update set * "
    "when not matched and s.op <> 'D' then insert (id, name, op, ts) values (s.id, s.name, s.op, s.ts)",
    "select name, count(*), max(ts) from {schema}.training group by name order by name",
    "select snapshot_id, summary['total-records'] from {schema}.training.snapshots",
    "show table extended in {schema} like '*'",
    "uncache table training_batch",
]


def make_archive(archive: Path = jvm_classes.ARCHIVE) -> Path:
    """Writes `archive`; returns it. RuntimeError, in one line, when Java did not make a usable one."""
    java = shutil.which("java")
    if java is None:
        raise RuntimeError("no `java` on the PATH")
    archive.parent.mkdir(parents=True, exist_ok=True)
    partial = archive.with_name(f"{archive.stem}.{os.getpid()}.partial")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="cdc-jvm-classes-") as work:
        folder = Path(work)
        environ = {
            "CDC_TARGET": "local",
            "CDC_WAREHOUSE": str(folder / "warehouse"),
            "CDC_STATE_DIR": str(folder / "warehouse"),
            "CDC_LANDING_ROOT": str(folder / "landing"),
            "CDC_SCHEMA": "jvm_classes",
            env.JVM_OPTIONS: jvm_classes.make_options(partial),
        }
        with env.overridden(environ):
            _train(folder)
    try:
        if not partial.is_file() or partial.stat().st_size == 0:
            raise RuntimeError(f"Java wrote no archive ({partial})")
        if not usable(java, partial):
            raise RuntimeError("a JVM could not start with the archive Java wrote")
        os.replace(partial, archive)
    finally:
        partial.unlink(missing_ok=True)
    size = archive.stat().st_size / 1e6
    log.info("jvm-classes: %s (%.0f MB) in %.0f s", archive, size, time.monotonic() - started)
    return archive


def usable(java: str, archive: Path) -> bool:
    """A JVM starts with `archive` and exits cleanly: Java has checked its header against its own build and
    mapped it (a truncated archive stops the JVM with SIGBUS)."""
    with tempfile.TemporaryDirectory(prefix="cdc-jvm-check-") as scratch:  # where a crashed JVM writes its report
        checked = subprocess.run(
            [java, f"-XX:SharedArchiveFile={archive}", "-Xshare:auto", "-version"],
            capture_output=True,
            check=False,
            cwd=scratch,
        )
    return checked.returncode == 0


def _train(folder: Path) -> None:
    """Runs TRAINING in a JVM of its own, then ends that JVM and waits until Java has written the archive
    (at the JVM's exit, after this process would otherwise have gone)."""
    from pyspark import SparkContext

    from python_hooks.project.warehouse import Warehouse

    warehouse = Warehouse.open(["--target", "local"])
    try:
        for statement in TRAINING:
            sql = statement.format(schema=warehouse.schema, raw=folder / "raw")
            if sql.lstrip().startswith("select") or sql.startswith("show"):
                warehouse.query(sql)
            else:
                warehouse.execute(sql)
    finally:
        warehouse.close()
        gateway = SparkContext._gateway
        if SparkContext._active_spark_context is not None:
            SparkContext._active_spark_context.stop()
        if gateway is not None:
            process = gateway.proc
            gateway.shutdown()
            # The JVM exits when its standard input closes (pyspark's gateway), and writes the archive then.
            process.stdin.close()
            process.wait(timeout=600)
