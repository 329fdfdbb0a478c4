"""The live demo waits for its loop's runs by their lines (python_hooks/commands/loop.py logs one per run)."""

from __future__ import annotations

import os
import threading

from python_hooks.commands.live_demo import LoopRuns


def test_runs_are_counted_from_the_loops_lines_and_every_line_is_passed_on(capsys):
    read, write = os.pipe()
    runs = LoopRuns(os.fdopen(read, "r"))
    writer = os.fdopen(write, "w")
    lines = [
        "running the pipeline every 10 s; Ctrl-C or SIGTERM stops it after the run in progress\n",
        "dbt build: 3 table(s) with new files\n",
        "run 1 succeeded in 54.9 s; next at 09:59:33 (it took longer than 10 s: the next starts now)\n",
        "  shop__customer: applied; recorded at the end of the run (4.1 s)\n",
    ]
    writer.writelines(lines)
    writer.flush()
    assert runs.wait_for(1, 10)
    assert not runs.wait_for(2, 0.2), "a table's line that mentions a run is not a run's end"
    waiting = threading.Thread(target=lambda: setattr(waiting, "ended", runs.wait_for(3, 10)))
    waiting.start()
    later = ["run 2 FAILED in 3.0 s; next at 10:00:00\n", "run 3 succeeded in 17.2 s\n"]
    writer.writelines(later)
    writer.flush()
    waiting.join()
    assert waiting.ended and runs.finished == 3
    writer.close()
    assert not runs.wait_for(4, 10), "the loop's output ended: no wait for a run that cannot come"
    assert capsys.readouterr().out == "".join(lines + later)
