"""`python -m python_hooks run --every <seconds>`: the pipeline in a loop, as a scheduler would run
`make run` every few minutes, in one process (one dbt runner, one Spark session on the embedded target:
no JVM start per run).

- A run starts every `seconds` after the previous one started; one that takes longer is followed at
  once by the next (said in its line), never by two.
- Ctrl-C or SIGTERM: the run in progress finishes, then the loop stops and says so (exit 0). A second
  one stops at once (KeyboardInterrupt): a run cut short is repaired by the next (docs/operations.md).
- Never two loops at once on this machine for one warehouse: an exclusive lock on
  `<CDC_STATE_DIR>/.run-every.lock`, refused in one line naming the holder. (On the embedded target a
  second process is refused anyway: python_hooks/project/embedded_lock.py.)
- A failed run does not stop the loop: it is said, and the next run tries again.
- `--maintain-every SECONDS`: `maintain` (python_hooks/commands/maintain.py) in the loop's own process, after
  the run in progress, once SECONDS have passed since the loop started or since its last maintenance began. On
  the embedded target the loop holds the warehouse for its whole life, so `make maintain` beside it is refused;
  this is how a loop keeps its warehouse bounded. Its time counts in the turn's (the next run may start at once).
- `--full-refresh` (`-f`) rebuilds in the first run only, and the later runs apply what lands: a loop started
  to rebuild its tables, in the JVM the runs after it use (`make demo-live` starts its loop so;
  python_hooks/commands/run.py: runs_args).
"""

from __future__ import annotations

import datetime as dt
import logging
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from python_hooks.project import embedded_lock

log = logging.getLogger("python_hooks.loop")

LOCK_NAME = ".run-every.lock"


class LoopInUse(RuntimeError):
    pass


def take_lock(folder: Path) -> IO[str]:
    """The loop's lock for this warehouse (kept open for the life of the loop), or LoopInUse."""
    try:
        return embedded_lock.hold(folder / LOCK_NAME)
    except embedded_lock.Held as held:
        raise LoopInUse(f"a `run --every` loop already runs on this warehouse: {held.holder}") from None


class StopRequest:
    """SIGINT / SIGTERM handlers for the loop's life: the first asks for a stop after the current
    run, the second raises KeyboardInterrupt. The previous handlers come back on close()."""

    def __init__(self) -> None:
        self.requested: str | None = None
        self._previous = {}

    def __enter__(self) -> StopRequest:
        for number in (signal.SIGINT, signal.SIGTERM):
            self._previous[number] = signal.signal(number, self._handle)
        return self

    def __exit__(self, *_: object) -> None:
        for number, handler in self._previous.items():
            signal.signal(number, handler)

    def _handle(self, number: int, _frame) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = signal.Signals(number).name
        log.info("%s: stopping after the run in progress (again to stop at once)", self.requested)


def run_every(
    seconds: float,
    run_once: Callable[[], bool],
    stop: StopRequest,
    runs: int | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[int, int]:
    """Calls `run_once` every `seconds` until `stop` is requested (or `runs` runs are done); returns
    (runs, failed runs)."""
    done = failed = 0
    while not stop.requested and (runs is None or done < runs):
        started = clock()
        ok = run_once()
        done += 1
        failed += 0 if ok else 1
        took = clock() - started
        wait = max(0.0, seconds - took)
        if stop.requested or (runs is not None and done >= runs):
            log.info("run %d %s in %.1f s", done, "succeeded" if ok else "FAILED", took)
            break
        next_at = (dt.datetime.now() + dt.timedelta(seconds=wait)).strftime("%H:%M:%S")
        late = "" if wait else f" (it took longer than {seconds:g} s: the next starts now)"
        log.info("run %d %s in %.1f s; next at %s%s", done, "succeeded" if ok else "FAILED", took, next_at, late)
        deadline = clock() + wait
        while not stop.requested and clock() < deadline:
            sleep(min(0.5, deadline - clock()))
    return done, failed


def with_maintenance(
    run_once: Callable[[], bool],
    maintain_once: Callable[[], bool],
    every: float,
    clock: Callable[[], float] = time.monotonic,
) -> Callable[[], bool]:
    """A turn of the loop: `run_once`, then `maintain_once` when `every` seconds have passed since the first
    turn began or since the last maintenance began (a failed one is said by it and due again `every` seconds
    later). The turn is ok when both were."""
    last = None

    def turn() -> bool:
        nonlocal last
        if last is None:
            last = clock()
        ok = run_once()
        if clock() - last < every:
            return ok
        last = clock()
        log.info("maintenance, due every %g s (--maintain-every)", every)
        return maintain_once() and ok

    return turn


def loop(seconds: float, run_once: Callable[[], bool], lock_folder: Path, runs: int | None = None) -> int:
    """The command: the lock, the signal handlers, the loop, one closing line. Exit status 0 when
    stopped on request (even after failed runs: each was said), 1 when the lock is held."""
    if seconds <= 0:
        raise SystemExit("--every takes a number of seconds above 0")
    try:
        held = take_lock(lock_folder)
    except LoopInUse as error:
        log.error("%s", error)
        return 1
    try:
        with StopRequest() as stop:
            log.info("running the pipeline every %g s; Ctrl-C or SIGTERM stops it after the run in progress", seconds)
            done, failed = run_every(seconds, run_once, stop, runs)
        why = f"on {stop.requested}" if stop.requested else f"after {done} run(s)"
        log.info("stopped %s: %d run(s), %d failed", why, done, failed)
        return 0
    finally:
        held.close()
