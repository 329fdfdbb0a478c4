"""`python -m bench` (`make bench`): the CDC pipeline benchmark at the scale the environment sets
(bench/README.md).

    BENCH_ROWS              rows of the initial load                      (default 5,000,000)
    BENCH_BATCH_FRACTION    changes per CDC batch, as a fraction of rows  (default 0.01)
    BENCH_BATCHES           CDC batches per table: all but the last warm up, the last is measured (default 2)
    BENCH_SCALE_FACTOR      the scaled table is this many times larger     (default 4)
    BENCH_SEED              generator seed                                 (default 20261101)
    BENCH_STAGES            stage groups to run, comma-separated: orders, stock, erasure, scaled, many,
                            idle, history (default all; the ratios of the others are null)
    BENCH_ERASED_CUSTOMERS  customers the erasure stage erases from the 1x table (default 10)
    BENCH_MANY_TABLES, BENCH_MANY_ROWS, BENCH_MANY_BATCH, BENCH_MANY_BATCHES   the many-tables stages
                            (M, Z): tables, rows each, changes per batch and table, batches (default
                            20, 100,000, 1,000, 2: one warm-up run)
    BENCH_HISTORY_FILES     applied files in the landing-history stage (H) (default 5,000; the
                            other table has them in 5); BENCH_HISTORY_FILE_ROWS (4), BENCH_HISTORY_BATCH
                            (changes in the new file, 1,000), BENCH_HISTORY_LAYOUT (flat | dated)
    BENCH_WORK              work folder: raw files, warehouse, dbt project (default data/bench; emptied first)
    BENCH_TARGET            local | cluster: the dbt target measured      (default local; cluster: after
                            `make cluster-up`)
    BENCH_STORAGE           local | s3: landing zone and warehouse on this disk, or on a local S3 server
                            the bench starts in BENCH_WORK/s3 and stops at the end (default local;
                            s3 on the local target only; bench/storage.py)
    BENCH_RESULTS           where latest.json / latest.md go              (default bench/results;
                            latest-cluster.json / .md on the cluster target, latest-s3.json / .md
                            with BENCH_STORAGE=s3)
    BENCH_REF               take macros/, dbt_project.yml, profiles/ from this git commit (default: working tree)
    BENCH_PATCH             comma-separated diffs applied to a copy of macros/, dbt_project.yml and
                            profiles/ before the run, to measure a proposed change
    CDC_DRIVER_MEMORY, CDC_SHUFFLE_PARTITIONS   the profile's own knobs

On `local`, runs in a fresh warehouse of its own (BENCH_WORK/warehouse, or s3a://cdc-bench/warehouse
on the bench's S3 server), never the project's data/warehouse. On `cluster`, in the cluster's
warehouse, in the schemas `bench`, `bench_staging`, `bench_current`, `bench_cdc_meta`, which it drops
at the start of every run.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import sys
import time
from pathlib import Path

from bench.project import REPO_ROOT

MARKER = ".bench-work"
log = logging.getLogger("bench")


def _fresh_work(work: Path) -> None:
    """Empty the work folder, but only one the benchmark created (it holds a marker file)."""
    if work.exists() and any(work.iterdir()):
        if not (work / MARKER).exists():
            raise SystemExit(
                f"BENCH_WORK={work} is not empty and was not created by the benchmark: refusing to empty it"
            )
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    (work / MARKER).write_text("created by python -m bench; emptied at the start of every run\n")


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    os.environ["TZ"] = "UTC"  # PySpark returns naive local datetimes: make local time UTC
    time.tzset()

    from bench import storage
    from bench.report import markdown, write_results
    from bench.run import Settings, run_benchmark
    from bench.sql import TargetUnavailable
    from python_hooks.project import env

    settings = Settings.from_env()
    work = Path(os.environ.get("BENCH_WORK") or REPO_ROOT / "data" / "bench").resolve()
    results_dir = Path(os.environ.get("BENCH_RESULTS") or REPO_ROOT / "bench" / "results").resolve()
    storage.stop_leftover(work)
    _fresh_work(work)
    # A `kill` ends the run as Ctrl-C does: through the `finally`s, which stop the bench's S3 server.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    with contextlib.ExitStack() as stack:
        if settings.storage == "s3":
            # Its server, CDC_WAREHOUSE and the AWS variables: static Spark settings, so before the session starts.
            where = stack.enter_context(storage.s3(work))
        else:
            where = storage.local_storage(work, work / "warehouse" if settings.target == "local" else None)
            if settings.target == "local":
                # The bench's own warehouse and metastore: static Spark settings, so before the session starts.
                os.environ["CDC_WAREHOUSE"] = str(work / "warehouse")
        if settings.target == "local":
            # The erasure stage's keyed hash: Spark reads it from the JVM's environment (docs/personal-data.md).
            os.environ.setdefault("CDC_ERASURE_SECRET", "bench-only-erasure-secret-00000")
        env.apply_defaults()
        log.info("benchmark: %s, work folder %s", settings, work)
        try:
            results = run_benchmark(settings, work, storage=where)
        except TargetUnavailable as error:
            log.error("%s", error)
            return 2
    json_path, md_path = write_results(results, results_dir)
    sys.stdout.write(markdown(results))
    log.info("wrote %s and %s", json_path, md_path)
    return 0 if results["correct"] else 1


if __name__ == "__main__":
    sys.exit(main())
