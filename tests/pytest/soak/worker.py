"""The soak's long-lived process (SOAK_MODE=loop): the day's commands in one process, as `python -m python_hooks
run --every SECONDS --maintain-every SECONDS` runs them all day (python_hooks/commands/loop.py): one dbtRunner
and one Spark session for every run, `maintain` and the erasure in the same process. The soak says when:

    PYTHONPATH=.:tests/pytest python -m soak.worker       one command per line on stdin (JSON), e.g.
    {"kind": "run", "kill_at": null}  {"kind": "maintain"}  {"kind": "erase", "subject": "c", "keys": ["7"], ...}

After each command it prints `soak worker: done <exit status>` on a line of its own (its other output before it). A
kill point (CDC_KILL_AT, set for that command only) kills the process group, its Spark JVM too, as a crash would: the
soak starts another worker for the next command, as a scheduler's supervisor starts the loop again."""

from __future__ import annotations

import json
import logging
import os
import sys

from python_hooks.commands.maintain import run_maintenance
from python_hooks.commands.personal_data import run_personal_data
from python_hooks.commands.run import make_runner, run_pipeline
from python_hooks.project import env, faults
from soak.commands import DONE


def main() -> int:
    env.apply_defaults()
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)
    logging.getLogger("py4j").setLevel(logging.WARNING)
    runner = make_runner(kill_points=True)  # as `run --every` makes it, the kill callback there for every command
    for line in sys.stdin:
        if not line.strip():
            continue
        command = json.loads(line)
        if command.get("kill_at"):  # for this command only (the soak's environment has none: soak/commands.py)
            os.environ[faults.KILL_AT] = command["kill_at"]
        try:
            ok = _do(command, runner)
        except Exception:  # noqa: BLE001 - said in the command's log; the loop goes on, as run --every does
            logging.getLogger("soak.worker").exception("the command failed")
            ok = False
        finally:
            os.environ.pop(faults.KILL_AT, None)
        sys.stderr.flush()
        print(f"{DONE}{0 if ok else 1}", flush=True)
    return 0


def _do(command: dict, runner) -> bool:
    kind = command["kind"]
    if kind == "run":
        return run_pipeline([], runner=runner)
    if kind == "maintain":
        return run_maintenance(())
    if kind == "erase":
        lines = run_personal_data("erase", command["subject"], command["keys"], (), command["reason"], ())
        for text in lines or ():
            print(text)
        return lines is not None
    raise ValueError(f"soak worker: no command {kind!r}")


if __name__ == "__main__":
    sys.exit(main())
