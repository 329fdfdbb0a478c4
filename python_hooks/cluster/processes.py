"""The cluster's processes: started detached with a PID file, known as ours by a marker in their
command line, waited for until they answer, stopped by PID."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from python_hooks.cluster.config import HOST, ClusterConfig

log = logging.getLogger(__name__)


def ownership_marker(config: ClusterConfig) -> str:
    """In every JVM's command line: tells our processes from anyone else's with the same PID."""
    return f"-Dcdc.cluster.dir={config.root}"


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def running_pid(config: ClusterConfig, part: str) -> int | None:
    """The PID of `part` if the process in its PID file is alive and is ours."""
    try:
        pid = int(config.pid_file(part).read_text().strip())
    except (OSError, ValueError):
        return None
    expected = str(config.pgdata) if part == "postgres" else ownership_marker(config)
    return pid if expected in cmdline(pid) else None


def port_open(port: int) -> bool:
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.settimeout(1)
        return sock.connect_ex((HOST, port)) == 0


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def wait_until(what: str, ready: Callable[[], bool], seconds: float, log_file: Path, pid: int) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if ready():
            return
        if not pid_alive(pid):
            raise SystemExit(f"{what} stopped while starting: see {log_file}")
        time.sleep(1)
    raise SystemExit(f"{what} did not answer within {seconds:.0f} s: see {log_file}")


def spawn(config: ClusterConfig, part: str, command: list[str], extra_env: dict[str, str]) -> int:
    log_file = config.log_file(part)
    with log_file.open("ab") as out:
        out.write(f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')} starting: {' '.join(command)}\n".encode())
        out.flush()
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **extra_env},
            start_new_session=True,  # a Ctrl-C in the shell that ran `make cluster-up` does not stop it
        )
    config.pid_file(part).write_text(f"{process.pid}\n")
    return process.pid


def stop_pid(config: ClusterConfig, part: str, seconds: float = 60) -> None:
    pid = running_pid(config, part)
    if pid is None:
        config.pid_file(part).unlink(missing_ok=True)
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and running_pid(config, part):
        time.sleep(0.5)
    if running_pid(config, part):
        log.warning("%s (pid %d) did not stop within %.0f s: killed", part, pid, seconds)
        os.kill(pid, signal.SIGKILL)
    config.pid_file(part).unlink(missing_ok=True)
    log.info("%s: stopped (pid %d)", part, pid)


def private_file(path: Path, text: str) -> None:
    """Written readable by its owner only: it may hold the metastore password."""
    path.touch(mode=0o600)
    path.chmod(0o600)
    path.write_text(text, encoding="utf-8")
