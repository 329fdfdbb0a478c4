"""`make soak`: PYTHONPATH=.:tests/pytest python -m soak (soak/__init__.py says what it does);
`python -m soak check`: the checks and the report again, on the finished day in SOAK_WORK."""

from __future__ import annotations

import logging
import signal
import sys

from soak.day import Day
from soak.settings import from_env


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    # SIGTERM (a scheduler's or `timeout`'s) ends the soak as Ctrl-C does: the command running is killed.
    signal.signal(signal.SIGTERM, lambda number, frame: sys.exit(128 + number))
    try:
        settings = from_env()
    except ValueError as error:
        logging.getLogger("soak").error("soak: %s", error)
        return 2
    day = Day(settings)
    if sys.argv[1:] == ["check"]:  # the checks again, on a finished day's work folder (no Spark)
        day.load()
        return day.finish(inspected=day.dumped.is_file())
    return day.live()


if __name__ == "__main__":
    sys.exit(main())
