"""Kill points: a run that kills itself with SIGKILL at a named point, for the fault-injection tests
(tests/pytest/test_faults.py, `make faults`). Nothing happens unless CDC_KILL_AT is set.

    CDC_KILL_AT=<point>[:<table>]    e.g. during_merge:crm__customer_master
    CDC_KILL_DELAY=<seconds>         for a `during_*` point (placed just before a statement): kill this
                                     long after the point, while the statement runs (default 1)

The points inside dbt are the macro `cdc_fault_point` (macros/cdc/fault_points.sql): it logs
"cdc: kill point <point> of <relation> reached", and `dbt_callback`, which `make run`
(python_hooks/commands/run.py) gives its dbtRunner when CDC_KILL_AT is set, kills the process there. The
points in Python (schema evolution) call `point()`. The kill takes the whole process group when this
process leads one (the embedded target's Spark JVM is a child: it goes too, as in a crash of the
machine or container); else this process alone.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading

log = logging.getLogger(__name__)

KILL_AT = "CDC_KILL_AT"
KILL_DELAY = "CDC_KILL_DELAY"
MARKER = "cdc: kill point "


def enabled() -> bool:
    return bool(os.environ.get(KILL_AT, "").strip())


def wanted(name: str, table: str | None = None) -> bool:
    point, _, only = os.environ.get(KILL_AT, "").strip().partition(":")
    return point == name and (not only or only == table)


def _kill() -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    if os.getpgrp() == os.getpid():
        os.killpg(os.getpgrp(), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


def arm(name: str) -> None:
    """Kill now, or for a `during_*` point, CDC_KILL_DELAY seconds from now (from another thread, so
    the statement that follows the point is running)."""
    if not name.startswith("during_"):
        _kill()
        return
    delay = float(os.environ.get(KILL_DELAY) or 1.0)
    threading.Timer(delay, _kill).start()


def point(name: str, table: str | None = None) -> None:
    """A kill point in Python code."""
    if wanted(name, table):
        print(f"{MARKER}{name} of {table} reached", flush=True)
        arm(name)


def dbt_callback(event) -> None:
    """dbtRunner callback: arms the kill when a `cdc_fault_point` macro logs its line."""
    message = getattr(event.data, "msg", "")
    if isinstance(message, str) and message.startswith(MARKER):
        arm(message[len(MARKER) :].split(" ", 1)[0])
