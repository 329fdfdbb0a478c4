"""The project's commands as a scheduler starts them, two ways (SOAK_MODE):

- `loop` (the default): in one long-lived process (soak/worker.py), as `python -m python_hooks run --every
  --maintain-every` runs them all day: one Spark session for every run, `maintain` and the erasure in it too. A
  killed worker is started again for the next command, as a supervisor starts a loop again.
- `processes`: each in a process of its own (`python -m python_hooks run | maintain | erase`, what `make run` and
  `make maintain` run from cron), its JVM started each time.

Either way in a process group of its own: a kill (python_hooks/project/faults.py, CDC_KILL_AT, as
tests/pytest/test_faults.py arms it) takes its Spark JVM too, as a crash of the machine would. Each command's
output goes to `<work>/logs/<label>.log`."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from helpers.paths import import_path
from python_hooks.project import faults
from soak.settings import Settings

SCHEMA = "soak"  # CDC_SCHEMA: the soak's tables are soak_current.*, soak_cdc_meta.*
SECRET = "soak-erasure-secret-0123456789"  # CDC_ERASURE_SECRET of every command (the erasure's keyed hash)
# Variables of the caller's environment a soak command must not inherit (a test's kill or pause point).
DROPPED = (
    "CDC_KILL_AT",
    "CDC_PAUSE_AT",
    "CDC_PAUSE_RELEASE",
    "CDC_ONE_MERGE_MAX_BYTES",
    "CDC_MERGE_BROADCAST_MAX_BYTES",
    "CDC_VERBOSE",
)


@dataclass
class Outcome:
    """One command of the day: what, when (simulated minute, wall clock), how long, how it ended."""

    kind: str  # run | maintain | erase | inspect
    number: int  # the run's number (1-based); 0 for the others
    minute: int
    started: float  # wall clock (time.time())
    seconds: float
    returncode: int
    kill_at: str | None = None
    killed: bool = False  # the kill point was reached and the process group died of SIGKILL
    recovery: bool = False  # the first run after a killed one
    files: int = 0  # raw files landed since the previous run
    warehouse_bytes: int = 0  # the warehouse's files on disk after the command
    log: str = ""

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def record(self) -> dict:
        return asdict(self)


def environment(settings: Settings, project: Path) -> dict[str, str]:
    """The environment of every soak command: the embedded target on the soak's own warehouse, landing
    root, schema and project copy (DBT_PROJECT_DIR, which dbt and the hooks' warehouse both read)."""
    work = settings.work
    environ = {name: value for name, value in os.environ.items() if name not in DROPPED}
    environ.update(
        {
            "PYTHONPATH": import_path(dict(os.environ)),
            "CDC_TARGET": "local",
            "CDC_LANDING_ROOT": str(work / "landing"),
            "CDC_WAREHOUSE": str(work / "warehouse"),
            "CDC_STATE_DIR": str(work / "warehouse"),
            "CDC_SCHEMA": SCHEMA,
            "DBT_PROJECT_DIR": str(project),
            "DBT_LOG_PATH": str(work / "logs" / "dbt"),
            "CDC_ERASURE_SECRET": SECRET,
            faults.KILL_DELAY: "1",
        }
    )
    return environ


def cli_args(command: dict) -> list[str]:
    """`python -m` arguments of a command of the day: {"kind": "run" | "maintain"}, {"kind": "erase", "subject",
    "keys", "reason"} or {"kind": "inspect", "dump"}."""
    kind = command["kind"]
    if kind == "erase":
        keys = [part for key in command["keys"] for part in ("--key", key)]
        return ["python_hooks", "erase", "--subject", command["subject"], *keys, "--reason", command["reason"]]
    if kind == "inspect":
        return ["soak.inspect_warehouse", command["dump"]]
    return ["python_hooks", kind]


class Worker:
    """SOAK_MODE=loop: the day's run, maintain and erase commands in one process of soak/worker.py, started
    again after a kill (or a hung command's timeout). `do` has `start`'s signature and result."""

    def __init__(
        self,
        settings: Settings,
        environ: dict[str, str],
        project: Path,
        program: tuple[str, ...] = ("-m", "soak.worker"),
    ) -> None:
        self.settings, self.environ, self.project, self.program = settings, environ, project, program
        self.process: subprocess.Popen | None = None
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.started = 0  # workers started, 1 + those after a kill

    def _start(self) -> None:
        self.lines = queue.Queue()
        self.process = subprocess.Popen(
            [sys.executable, *self.program],
            env={**self.environ, "PYTHONUNBUFFERED": "1"},
            cwd=self.project,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # its own process group: a kill takes its Spark JVM too
        )
        self.started += 1
        threading.Thread(target=_copy_lines, args=(self.process.stdout, self.lines), daemon=True).start()

    def do(self, command: dict, label: str, kill_at: str | None = None) -> tuple[int, float, float, str]:
        if command["kind"] == "inspect":  # a process of its own, once the worker has let the warehouse go
            self.close()
            return start(self.settings, self.environ, self.project, cli_args(command), label, kill_at)
        if self.process is None:
            self._start()
        log = self.settings.work / "logs" / f"{label}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        wall, started = time.time(), time.monotonic()
        deadline = started + self.settings.run_timeout
        code = None
        with log.open("w", encoding="utf-8") as out:
            try:
                self.process.stdin.write(json.dumps({**command, "kill_at": kill_at}) + "\n")
                self.process.stdin.flush()
            except BrokenPipeError:
                pass  # the worker died between commands: its output ends at once, below
            try:
                while code is None:
                    try:
                        line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
                    except queue.Empty:
                        out.write(f"\nsoak: no end after {self.settings.run_timeout} s: the worker killed\n")
                        code = self._kill()
                        break
                    if line is None:  # the worker ended: killed at a kill point, or it failed
                        code = self.process.wait()
                        _reap(self.process.pid)
                        self.process = None
                    elif line.startswith(DONE):
                        code = int(line[len(DONE) :])
                    else:
                        out.write(line)
            except BaseException:  # the soak itself stopped (Ctrl-C, SIGTERM): the worker's group goes too
                if self.process is not None:
                    self._kill()
                raise
        return code, wall, time.monotonic() - started, log.read_text(encoding="utf-8", errors="replace")

    def _kill(self) -> int:
        os.killpg(self.process.pid, signal.SIGKILL)
        code = self.process.wait()
        _reap(self.process.pid)
        self.process = None
        return code

    def close(self) -> None:
        """Ends the worker (stdin closed: it exits after the command in progress) and what is left of its group."""
        if self.process is None:
            return
        self.process.stdin.close()
        try:
            self.process.wait(timeout=300)
        except subprocess.TimeoutExpired:
            self._kill()
            return
        _reap(self.process.pid)
        self.process = None


DONE = "soak worker: done "  # soak/worker.py's line after each command, then its exit status


def _copy_lines(stream, lines: queue.Queue) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)


class Processes:
    """SOAK_MODE=processes: each command in a process of its own (`start`)."""

    def __init__(self, settings: Settings, environ: dict[str, str], project: Path) -> None:
        self.settings, self.environ, self.project = settings, environ, project

    def do(self, command: dict, label: str, kill_at: str | None = None) -> tuple[int, float, float, str]:
        return start(self.settings, self.environ, self.project, cli_args(command), label, kill_at)

    def close(self) -> None:
        pass


def start(
    settings: Settings, environ: dict[str, str], project: Path, args: list[str], label: str, kill_at: str | None = None
) -> tuple[int, float, float, str]:
    """Runs `python -m <args>` to its end (or its kill); (return code, wall start, seconds, its output)."""
    log = settings.work / "logs" / f"{label}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    environ = dict(environ)
    if kill_at:
        environ[faults.KILL_AT] = kill_at
    wall = time.time()
    started = time.monotonic()
    with log.open("w", encoding="utf-8") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", *args],
            env=environ,
            cwd=project,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: a kill takes its Spark JVM too
        )
        try:
            code = process.wait(timeout=settings.run_timeout)
        except subprocess.TimeoutExpired:
            out.write(f"\nsoak: no end after {settings.run_timeout} s: process group {process.pid} killed\n")
            os.killpg(process.pid, signal.SIGKILL)
            code = process.wait()
        except BaseException:  # the soak itself stopped (Ctrl-C, SIGTERM): its command's group goes too
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            raise
    seconds = time.monotonic() - started
    _reap(process.pid)
    return code, wall, seconds, log.read_text(encoding="utf-8", errors="replace")


def _reap(group: int, wait: float = 30.0) -> None:
    """Waits for what is left of the command's process group (its JVM), then kills it: the next command
    needs the embedded warehouse to itself."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return
        time.sleep(0.5)
    try:
        os.killpg(group, signal.SIGKILL)
    except ProcessLookupError:
        pass


def folder_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file()) if folder.is_dir() else 0
