"""A private PostgreSQL server on this machine: its own data folder, port and socket folder, bound to
127.0.0.1, started with `pg_ctl` (the Debian binaries, run as the `postgres` user when we are root),
known as ours by its data folder in its command line, stopped by the PID in its PID file.

The shared target's metastore (python_hooks/cluster/) and the live source database
(python_hooks/live/) each run one; this module is the one place that knows how.

Run as root, the server runs as `postgres`, who must be able to enter every folder on the way to its data,
socket and log folders: a clone inside a 0700 folder (`mktemp -d`, /root) is refused before anything
starts, in one sentence naming the folder and what to do (`unreachable`). A failed initdb or start is
one line with the end of its log, never a traceback.
"""

from __future__ import annotations

import logging
import os
import pwd
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

HOST = "127.0.0.1"
STOP_SECONDS = 30


@dataclass(frozen=True)
class PrivatePostgres:
    """One server: `name` is what its log lines call it, `port_variable` the variable that moves its port;
    `settings` are `-c name=value` options given at every start (so they hold without editing postgresql.conf)."""

    name: str
    pgdata: Path
    port: int
    socket_dir: Path
    log_file: Path
    pid_file: Path
    port_variable: str
    settings: Mapping[str, str] = field(default_factory=dict)
    folder_variable: str = ""  # the variable that moves its folders, named when they cannot be reached


def pg_bin(name: str) -> str:
    """A PostgreSQL program: on PATH, else the newest Debian version's."""
    found = shutil.which(name)
    if found:
        return found
    versions = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"))
    if not versions:
        raise SystemExit(f"PostgreSQL's {name} not found: run `make cluster-packages` (Debian: postgresql)")
    return str(versions[-1])


def as_postgres(command: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: as root, run it as the `postgres` user."""
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def running_pid(server: PrivatePostgres) -> int | None:
    """The PID in the server's PID file, if that process is alive and serves its data folder."""
    try:
        pid = int(server.pid_file.read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if str(server.pgdata) in _cmdline(pid) else None


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(1)
        return sock.connect_ex((HOST, port)) == 0


def _postgres_enters(folder: Path) -> bool:
    """The `postgres` user can enter `folder` (search permission on it and on every folder above it)."""
    return subprocess.run(["runuser", "-u", "postgres", "--", "test", "-x", str(folder)], check=False).returncode == 0


def unreachable(server: PrivatePostgres) -> str | None:
    """Run as root: why the `postgres` user cannot reach the server's folders, in one sentence naming
    the first folder on the way it cannot enter and what to do; None when it can (or when not root)."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        return (
            f"{server.name}: PostgreSQL refuses to run as root and this machine has no `postgres` user to run it"
            " as: run `make cluster-packages` (Debian's postgresql package makes the user), or run as another user"
        )
    for needed in (server.pgdata.parent, server.socket_dir.parent, server.log_file.parent):
        if _postgres_enters(needed):
            continue
        blocker = next((f for f in [*reversed(needed.parents), needed] if not _postgres_enters(f)), needed)
        try:
            info = blocker.stat()
            mode = f" (mode {info.st_mode & 0o7777:04o}, owner {pwd.getpwuid(info.st_uid).pw_name})"
        except (OSError, KeyError):
            mode = ""
        elsewhere = f", or set {server.folder_variable} to a folder outside it" if server.folder_variable else ""
        return (
            f"{server.name}: run as root, PostgreSQL runs as the postgres user, who cannot enter {blocker}{mode}"
            f" on the way to {needed}: let it in with `chmod o+x {blocker}`{elsewhere}, or run as a user other"
            " than root"
        )
    return None


def _run(server: PrivatePostgres, what: str, command: list[str], **kwargs) -> None:
    """A PostgreSQL program that must succeed; its failure is one line with the end of the server's log."""
    try:
        subprocess.run(command, check=True, **kwargs)
    except subprocess.CalledProcessError as error:
        try:
            lines = [line.strip() for line in server.log_file.read_text(errors="replace").splitlines() if line.strip()]
        except OSError:
            lines = []
        said = f": {' / '.join(lines[-3:])}" if lines else ""
        raise SystemExit(
            f"{server.name}: {what} failed (exit status {error.returncode}){said} (log {server.log_file})"
        ) from None


def start(server: PrivatePostgres) -> None:
    """Start the server unless it runs (initdb first when its folder is empty). Harmless twice."""
    pid = running_pid(server)
    if pid:
        log.info("%s: already running on %s:%d (pid %d)", server.name, HOST, server.port, pid)
        return
    if _port_open(server.port):
        raise SystemExit(f"{server.name}: port {server.port} is taken by another process: set {server.port_variable}")
    folders = (server.pgdata.parent, server.socket_dir, server.log_file.parent, server.pid_file.parent)
    try:
        for folder in folders:
            folder.mkdir(parents=True, exist_ok=True)
        server.log_file.touch()
    except OSError as error:
        where = f" ({error.filename})" if error.filename else ""
        elsewhere = f"; set {server.folder_variable} to one it can" if server.folder_variable else ""
        raise SystemExit(
            f"{server.name}: cannot make its folders{where}: {error.strerror or error}: this user must be able to"
            f" write there{elsewhere}"
        ) from None
    refusal = unreachable(server)
    if refusal:
        raise SystemExit(refusal)
    owner = ["chown", "-R", "postgres:postgres"] if os.geteuid() == 0 else None
    if not (server.pgdata / "PG_VERSION").exists():
        server.pgdata.mkdir(parents=True, exist_ok=True)
        if owner:
            subprocess.run([*owner, str(server.pgdata)], check=True)
        with server.log_file.open("ab") as out:
            _run(
                server,
                "initdb",
                as_postgres([pg_bin("initdb"), "--auth=trust", "--username=postgres", "-D", str(server.pgdata)]),
                stdout=out,
                stderr=subprocess.STDOUT,
            )
    if owner:
        subprocess.run([*owner, str(server.socket_dir)], check=True)
        subprocess.run([*owner, str(server.log_file)], check=True)
    options = [f"-c listen_addresses={HOST}", f"-p {server.port}", f"-k {server.socket_dir}"]
    options += [f"-c {name}={value}" for name, value in server.settings.items()]
    _run(
        server,
        "pg_ctl start",
        as_postgres(
            [pg_bin("pg_ctl"), "start", "-w", "-t", "60", "-D", str(server.pgdata), "-o", " ".join(options)]
            + ["-l", str(server.log_file)]
        ),
        stdout=subprocess.DEVNULL,
    )
    # pg_ctl leaves postmaster.pid; its first line is the server's PID.
    pid = int((server.pgdata / "postmaster.pid").read_text().splitlines()[0])
    server.pid_file.write_text(f"{pid}\n")
    log.info("%s: started on %s:%d (pid %d), data in %s", server.name, HOST, server.port, pid, server.pgdata)


def stop(server: PrivatePostgres, seconds: float = STOP_SECONDS) -> None:
    """Stop the server by its PID: a fast shutdown (SIGINT: sessions ended, a clean checkpoint), a kill
    after `seconds`. Harmless when it does not run."""
    pid = running_pid(server)
    if pid is None:
        server.pid_file.unlink(missing_ok=True)
        log.info("%s: not running (%s)", server.name, server.pgdata)
        return
    os.kill(pid, signal.SIGINT)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and running_pid(server):
        time.sleep(0.2)
    if running_pid(server):
        log.warning("%s (pid %d) did not stop within %.0f s: killed", server.name, pid, seconds)
        os.kill(pid, signal.SIGKILL)
    server.pid_file.unlink(missing_ok=True)
    log.info("%s: stopped (pid %d)", server.name, pid)


def psql(server: PrivatePostgres, sql: str, database: str = "postgres") -> str:
    """Runs SQL as the superuser over the private socket; returns its unaligned output."""
    command = [pg_bin("psql"), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1"]
    command += ["-h", str(server.socket_dir), "-p", str(server.port), "-d", database, "-c", sql]
    result = subprocess.run(as_postgres(command), capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise SystemExit(f"{server.name}: psql on {database} failed: {result.stderr.strip()}")
    return result.stdout.strip()
