"""The live commands of one test (python_hooks/live/), in its own folder under /tmp, on its own port;
the `live` fixture (conftest.py) starts its PostgreSQL and stops every process it started."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import psycopg
from psycopg.rows import dict_row

from helpers.cluster import free_ports
from helpers.paths import PROJECT, import_path
from python_hooks.live.config import config_from_env


class Live:
    """The live commands of one test, in its own folder, on its own port."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (port,) = free_ports(1)
        self.environ = {
            **os.environ,
            "CDC_LIVE_DIR": str(root / "live"),
            "CDC_LANDING_ROOT": str(root / "landing"),
            "CDC_LIVE_PG_PORT": str(port),
            "CDC_LIVE_FLUSH_SIZE": "20",
            "CDC_LIVE_ROTATE_MS": "1000",
            "PYTHONPATH": import_path(dict(os.environ)),
        }
        self.config = config_from_env(dict(self.environ))
        self.started: list[int] = []  # every capture process this test started

    def cli(self, *args: str, timeout: float = 180) -> str:
        result = subprocess.run(
            [sys.executable, "-m", "python_hooks", "live", *args],
            env=self.environ,
            cwd=PROJECT,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert result.returncode == 0, f"live {' '.join(args)} failed:\n{result.stdout}\n{result.stderr[-3000:]}"
        return result.stderr

    def start_capture(self) -> int:
        said = self.cli("capture", "--detach")
        pid = int(self.config.pid_file.read_text())
        self.started.append(pid)
        assert f"streaming (pid {pid})" in said
        return pid

    def kill_captures(self) -> None:
        """SIGKILL every capture this test started, also one whose start failed (its PID file names it):
        each only while its PID is still a live capture's, never a process that took the number since."""
        pids = set(self.started)
        with contextlib.suppress(OSError, ValueError):
            pids.add(int(self.config.pid_file.read_text()))
        for pid in pids:
            try:
                command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
                if b"python_hooks live capture" in command:
                    os.kill(pid, signal.SIGKILL)
            except (FileNotFoundError, ProcessLookupError):
                pass  # ended already

    def state(self) -> dict:
        return json.loads(self.config.state_file.read_text())

    def source_rows(self, table) -> dict[tuple, dict]:
        with psycopg.connect(self.config.conninfo(), row_factory=dict_row) as connection:
            rows = connection.execute(f'select * from "{table.schema}"."{table.name}"').fetchall()
        return {tuple(row[column] for column in table.key): row for row in rows}

    def topic_dir(self, table) -> Path:
        return self.config.topic_dir(table.topic)
