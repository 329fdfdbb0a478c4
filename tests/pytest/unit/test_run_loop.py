"""`run --every` (python_hooks/commands/loop.py) without Spark: the run function is the caller's, so the
schedule, the stop on a signal and the one-loop lock are tested with a function that records its calls."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from helpers.paths import PROJECT, import_path
from python_hooks.commands import loop
from python_hooks.commands.run import runs_args


class Clock:
    """A clock the loop's sleeps move forward."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_runs_start_every_period_and_a_long_run_is_followed_at_once():
    clock, starts = Clock(), []
    durations = iter([2.0, 15.0, 1.0, 1.0])

    def run_once() -> bool:
        starts.append(clock.now)
        clock.now += next(durations)
        return len(starts) != 2  # the second run fails: the loop goes on

    stop = loop.StopRequest()
    done, failed = loop.run_every(10, run_once, stop, runs=4, clock=clock, sleep=clock.sleep)
    assert (done, failed) == (4, 1)
    assert starts == [0.0, 10.0, 25.0, 35.0]  # the 15 s run: the next started when it ended


def test_a_stop_request_ends_the_loop_after_the_run_in_progress():
    clock, calls = Clock(), []
    stop = loop.StopRequest()

    def run_once() -> bool:
        calls.append(clock.now)
        if len(calls) == 2:
            stop.requested = "SIGTERM"  # arrives during the second run
        clock.now += 1
        return True

    assert loop.run_every(5, run_once, stop, clock=clock, sleep=clock.sleep) == (2, 0)
    assert calls == [0.0, 5.0]


def test_maintenance_follows_the_run_once_its_period_has_passed():
    """`run --every 10 --maintain-every 25`: a maintenance after the first run that ends 25 s or more after the
    loop began or after the last maintenance began; its time counts in the turn; a failed one counts as a failed
    turn and is due again a period later."""
    clock, log = Clock(), []
    run_seconds = iter([2.0, 2.0, 2.0, 12.0, 2.0, 2.0, 2.0, 2.0])
    maintenance_ok = iter([False, True, True])

    def run_once() -> bool:
        log.append(("run", clock.now))
        clock.now += next(run_seconds)
        return True

    def maintain_once() -> bool:
        log.append(("maintain", clock.now))
        clock.now += 6.0
        return next(maintenance_ok)

    turn = loop.with_maintenance(run_once, maintain_once, 25, clock=clock)
    done, failed = loop.run_every(10, turn, loop.StopRequest(), runs=8, clock=clock, sleep=clock.sleep)
    assert (done, failed) == (8, 1)
    assert log == [
        ("run", 0.0),
        ("run", 10.0),
        ("run", 20.0),
        ("run", 30.0),  # ends at 42: 25 s since the loop began
        ("maintain", 42.0),  # fails: due again from 42
        ("run", 48.0),  # the turn took 18 s: the next run at once
        ("run", 58.0),
        ("run", 68.0),  # ends at 70: 28 s since 42
        ("maintain", 70.0),
        ("run", 78.0),
    ]


def test_sigterm_stops_a_real_loop_cleanly_and_a_second_loop_is_refused(tmp_path):
    """A process running the loop gets SIGTERM during a run: that run ends, the loop says so, exit 0.
    While it runs, a second loop on the same folder is refused in one line."""
    script = textwrap.dedent(
        f"""
        import logging, sys, time
        from pathlib import Path
        from python_hooks.commands import loop
        logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)
        def run_once():
            print("run started", flush=True)
            time.sleep(1.0)
            print("run ended", flush=True)
            return True
        sys.exit(loop.loop(0.2, run_once, Path({str(tmp_path)!r})))
        """
    )
    environ = {**os.environ, "PYTHONPATH": import_path(os.environ)}
    first = subprocess.Popen(
        [sys.executable, "-c", script], env=environ, cwd=PROJECT, stdout=subprocess.PIPE, text=True
    )
    try:
        assert first.stdout.readline().startswith("running the pipeline every 0.2 s")
        assert first.stdout.readline() == "run started\n"
        second = subprocess.run(
            [sys.executable, "-c", script], env=environ, cwd=PROJECT, capture_output=True, text=True, timeout=60
        )
        assert second.returncode == 1
        assert f"a `run --every` loop already runs on this warehouse: pid {first.pid} since" in second.stdout
        first.send_signal(signal.SIGTERM)
        out, _ = first.communicate(timeout=60)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 0
    lines = out.splitlines()
    assert lines[0] == "SIGTERM: stopping after the run in progress (again to stop at once)"
    assert lines[1] == "run ended"
    assert lines[2].startswith("run 1 succeeded in ")
    assert lines[-1] == "stopped on SIGTERM: 1 run(s), 0 failed"


def test_every_needs_a_positive_period(tmp_path):
    with pytest.raises(SystemExit, match="above 0"):
        loop.loop(0, lambda: True, tmp_path)


def test_a_loops_full_refresh_rebuilds_in_its_first_run_only():
    args = runs_args(["--select", "source:shop+", "--full-refresh", "--target", "local"])
    assert args() == ["--select", "source:shop+", "--full-refresh", "--target", "local"]
    assert args() == ["--select", "source:shop+", "--target", "local"]
    assert args() == ["--select", "source:shop+", "--target", "local"]
    short = runs_args(["-f"])
    assert (short(), short()) == (["-f"], [])
    plain = runs_args(["--select", "a"])
    assert (plain(), plain()) == (["--select", "a"], ["--select", "a"])
