"""Another process that has an embedded warehouse: a small Python process that takes its lock
(python_hooks/project/embedded_lock.py, as every Spark session of the project does first) and keeps it
until it is killed. No Spark."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from helpers.paths import PROJECT

HOLD = """
import sys, time
from pathlib import Path
from python_hooks.project import embedded_lock
embedded_lock.acquire(Path(sys.argv[1]))
print("held", flush=True)
time.sleep(300)
"""


def start(warehouse: Path) -> subprocess.Popen:
    """The holder, once it has the lock of `warehouse`; the caller kills it."""
    process = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(warehouse)], stdout=subprocess.PIPE, text=True, cwd=PROJECT
    )
    assert process.stdout.readline().strip() == "held"
    return process


@contextmanager
def holding(warehouse: Path) -> Iterator[subprocess.Popen]:
    """The holder while the block runs, killed (SIGKILL) after it, also when it fails."""
    process = start(warehouse)
    try:
        yield process
    finally:
        process.kill()
        process.wait()
