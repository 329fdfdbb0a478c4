"""`python -m python_hooks live demo` (`make demo-live`): the live source end to end for a few minutes.

PostgreSQL up and seeded, the capture started (initial snapshot, then streaming), `run --every SECONDS
--downstream-every LONGER --full-refresh` in a process of its own (CDC_LIVE=1, `--select source:shop+`: the live
models only), whose first run builds the live tables from the snapshot, the workload spread over MINUTES once that
run has ended, the capture drained; the loop stopped once a run that started after the drain has ended, and one
last run (which finds nothing new unless the loop failed, and builds the snapshot and its models the loop held
back since it last built them: commands/downstream.py); then the comparison with PostgreSQL (`live compare`) and
the latency from commit to visible (python_hooks/live/latency.py). The latency is a running loop's, as a
scheduler's is all day: the loop's first run, which starts its JVM and builds the tables (about 50 s on 2 cores),
is over before the first change commits, and the last changes are applied by the loop, not by a process started
for them. The build runs in the
loop's JVM, not in a process before it, as a loop started on new tables builds them: its first batches then run in a
JVM that has compiled a build's work (the first run with changes 20-24 s, against 34 s in a JVM that had run
nothing; bench/TUNING.md round 39).
It is given for every change, then for the changes committed once the loop had applied a batch of the workload to
every table (its JVM's first batches of each shape, and the workload's schema changes, which come first, behind it).
The live tables' snapshots are dropped first: their history starts again with the fresh database.
Everything it started is stopped at the end, also on a failure or Ctrl-C: the loop, the capture, the
database. The live source's folder is emptied first, so the demo starts from a fresh database."""

from __future__ import annotations

import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from python_hooks.commands.live_compare import LIVE_MODELS, compare_live, compare_live_snapshots, live_models
from python_hooks.live import capture, latency, source, workload
from python_hooks.live.config import LiveConfig
from python_hooks.project.session import Session

log = logging.getLogger("python_hooks.live")

PAUSE = 0.5  # seconds after each of the workload's random transactions
LOOP_TIMEOUT = 600  # seconds the demo waits for a run of the loop to end
RUN_ENDED = re.compile(r"(?:.*\s)?run \d+ (?:succeeded|FAILED) in ")  # python_hooks/commands/loop.py's line
LIVE_ONLY = ("--select", "source:shop+")  # the runs build the live source's models only


def _command(*args: str) -> list[str]:
    return [sys.executable, "-m", "python_hooks", *args]


def _pipeline(*args: str) -> list[str]:
    return _command("run", *args)


def run_demo(
    config: LiveConfig,
    every: float,
    minutes: float,
    dbt_args: Sequence[str],
    seed: int = 28,
    downstream_every: float | None = None,
) -> bool:
    if source.running(config) or capture.running_pid(config) is not None:
        raise SystemExit(f"live demo: the live source in {config.folder} runs already: `make live-down` first")
    if not config.demo:
        raise SystemExit("live demo: runs on the demo's tables only; unset CDC_LIVE_CONFIG")
    os.environ[LIVE_MODELS] = "1"
    for part in (config.capture_dir, config.folder / "postgres", *(config.topic_dir(t.topic) for t in config.tables)):
        shutil.rmtree(part, ignore_errors=True)
    # An earlier demo's snapshots hold its database's history (and maybe columns this one's has not):
    # dropped, so that the first run starts them again from this database. (In a process of its own: on
    # the embedded target, this one's Spark would hold the warehouse until it ends.)
    if subprocess.run(_command("live", "drop-snapshots", *dbt_args)).returncode != 0:
        raise SystemExit("live demo: the live tables' snapshots could not be dropped (see above)")
    loop = None
    signal.signal(signal.SIGTERM, _stop)  # so that `finally` stops what was started
    try:
        source.up(config, demo_schema=True)
        workload.run(config, seed, 0, only_seed=True)
        capture.start(config)
        capture.drain(config, 120)
        # The loop's first run builds the tables again from the snapshot (--full-refresh, its first run only):
        # a warehouse may hold an earlier demo's tables, whose ledgers name files this fresh capture writes
        # again under the same names. In the loop's own JVM, which then runs the workload's batches.
        loop = subprocess.Popen(
            _pipeline(
                "--every",
                str(every),
                *(["--downstream-every", str(downstream_every)] if downstream_every else []),
                *LIVE_ONLY,
                "--full-refresh",
                *dbt_args,
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        runs = LoopRuns(loop.stdout)
        if not runs.wait_for(1, LOOP_TIMEOUT):
            raise SystemExit("live demo: the loop's first run did not end (see its lines above)")
        log.info("live demo: the loop is up; the workload starts")
        workload_started = time.time()
        rounds = max(1, int(minutes * 60 / PAUSE))
        workload.run(config, seed, rounds, only_seed=False, pause=PAUSE)
        log.info("live demo: the workload is done; the capture drains")
        capture.drain(config, 120)
        # The run in progress may have listed its folders before the last files landed: the one after it did not.
        if not runs.wait_for(runs.finished + 2, LOOP_TIMEOUT):
            log.error("live demo: the loop ended no run after the capture drained; the last run applies the rest")
        loop.send_signal(signal.SIGTERM)  # stops after the run in progress
        loop.wait(timeout=600)
        loop = None
        if subprocess.run(_pipeline(*LIVE_ONLY, *dbt_args)).returncode != 0:
            log.error("live demo: the last run failed")
        with Session.start(dbt_args) as session:
            results = [*compare_live(config, dbt_args, session=session), *compare_live_snapshots(session, config)]
            for result in results:
                (log.info if result.equal else log.error)("live compare: %s", result.line())
            models = {t.model: Path(t.folder.path) for t in live_models(config, session.manifest).values()}
            applied = latency.applied_times(session.warehouse, session.warehouse.meta_schema, models)
        found = latency.events(models, applied)
        for line in latency.summary(found):
            log.info("%s", line)
        moment, warm = latency.after_first_batches(found, workload_started)
        log.info(
            "once the loop had applied a batch of the workload to every table (%d of the events, committed from %s):",
            len(warm),
            latency.utc(moment),
        )
        for line in latency.summary(warm)[1:]:
            log.info("%s", line)
        log.info(
            "live demo: the loop ran every %s s%s",
            every,
            f", the snapshot and its models at most every {downstream_every:g} s" if downstream_every else "",
        )
        return all(result.equal for result in results)
    finally:
        if loop is not None:
            loop.send_signal(signal.SIGTERM)
            try:
                loop.wait(timeout=300)
            except subprocess.TimeoutExpired:
                loop.kill()
        capture.stop(config)
        source.down(config)


class LoopRuns:
    """The loop's lines, copied to this process's output as they come, counting the runs it has ended."""

    def __init__(self, lines: Iterable[str]) -> None:
        self.finished = 0
        self._ended = False
        self._changed = threading.Condition()
        threading.Thread(target=self._copy, args=(lines,), daemon=True).start()

    def _copy(self, lines: Iterable[str]) -> None:
        for line in lines:
            sys.stdout.write(line)
            sys.stdout.flush()
            if RUN_ENDED.match(line):
                with self._changed:
                    self.finished += 1
                    self._changed.notify_all()
        with self._changed:
            self._ended = True
            self._changed.notify_all()

    def wait_for(self, runs: int, timeout: float) -> bool:
        """Whether the loop has ended `runs` runs within `timeout` seconds (False at once if its output ends)."""
        with self._changed:
            return self._changed.wait_for(lambda: self.finished >= runs or self._ended, timeout) and (
                self.finished >= runs
            )


def _stop(signum: int, _frame) -> None:
    raise SystemExit(f"live demo: stopped by signal {signum}; stopping what it started")
