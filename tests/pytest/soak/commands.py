"""The project's commands, each in a process of its own as a scheduler starts it (`python -m python_hooks
run | maintain | erase`, what `make run` and `make maintain` run), in a process group of its own: a kill
(python_hooks/project/faults.py, CDC_KILL_AT, as tests/pytest/test_faults.py arms it) takes its Spark JVM
too, as a crash of the machine would. Each command's output goes to `<work>/logs/<label>.log`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
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
