"""The soak's long-lived worker as the soak drives it (soak/commands.py `Worker`), with a small Python program
in its place that speaks the same lines: each command's output to its log, its exit status from the `done`
line, a worker that dies (a kill point's SIGKILL) reported as killed and started again for the next command."""

from __future__ import annotations

import signal
import textwrap

from soak.commands import DONE, Worker
from soak.settings import Settings

PROGRAM = textwrap.dedent(
    f"""
    import json, os, signal, sys
    print("started", os.getpid(), flush=True)
    for line in sys.stdin:
        command = json.loads(line)
        print("doing", command["kind"], flush=True)
        if command.get("kill_at"):
            os.killpg(os.getpgrp(), signal.SIGKILL)
        print({DONE!r} + ("0" if command["kind"] == "run" else "1"), flush=True)
    """
)


def test_worker_runs_commands_in_one_process_and_starts_again_after_a_kill(tmp_path):
    settings = Settings(work=tmp_path, run_timeout=60)
    worker = Worker(settings, {}, tmp_path, program=("-c", PROGRAM))
    try:
        code, _, _, first = worker.do({"kind": "run"}, "run-001")
        assert code == 0 and "doing run" in first and DONE not in first
        code, _, _, second = worker.do({"kind": "maintain"}, "maintain-m0060")
        assert code == 1 and "started" not in second  # the same process: no second start line
        assert worker.started == 1
        code, _, _, killed = worker.do({"kind": "run"}, "run-002", kill_at="after_merge:t")
        assert code == -signal.SIGKILL and "doing run" in killed
        code, _, _, after = worker.do({"kind": "run"}, "run-003")
        assert code == 0 and "started" in after and worker.started == 2
        assert (tmp_path / "logs" / "run-002.log").read_text() == killed
    finally:
        worker.close()
    assert worker.process is None


def test_a_hung_command_is_killed_at_the_timeout(tmp_path):
    hung = "import sys\nfor line in sys.stdin:\n    import time; time.sleep(60)\n"
    worker = Worker(Settings(work=tmp_path, run_timeout=1), {}, tmp_path, program=("-c", hung))
    code, _, seconds, text = worker.do({"kind": "run"}, "run-001")
    assert code == -signal.SIGKILL and seconds < 30 and "no end after 1 s" in text
    assert worker.process is None
