"""The object store as everything reaches it: the standard AWS variables, a pyarrow filesystem made
from them, and the state of the local server that `python -m python_hooks s3 up` starts
(python_hooks/objectstore/), which `python -m python_hooks env --shell` turns into those variables.

    AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL   the endpoint; unset: AWS itself
    AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY     the keys; both unset: the development defaults below
                                                 (the local server only; on AWS, an instance profile)
    AWS_REGION                                   us-east-1 when unset
    CDC_S3_BUCKET                                the project's bucket, cdc-lakehouse when unset

Spark's S3A (profiles/profiles.yml), pyarrow, boto3 and the AWS CLI all read the same variables.
Secrets are never written here but to the local server's identities file (readable by its owner).
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from python_hooks.project.paths import PROJECT_ROOT

HOST = "127.0.0.1"
DEFAULT_PORT = 8333
DEFAULT_BUCKET = "cdc-lakehouse"
DEFAULT_REGION = "us-east-1"
# The local server's keys when AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are both unset: printed as
# what they are, development defaults, good for 127.0.0.1 and nothing else.
DEV_ACCESS_KEY_ID = "cdc-dev-access-key"
DEV_SECRET_ACCESS_KEY = "cdc-dev-secret-key-local-only"
STATE_FILE = "state.json"


@dataclass(frozen=True)
class Keys:
    access_key_id: str
    secret_access_key: str
    development: bool  # the defaults above, not the user's

    def __repr__(self) -> str:  # never the secret, in a log or a traceback
        return f"Keys(access_key_id={self.access_key_id!r}, development={self.development})"


def keys_from_env(environ: Mapping[str, str] = os.environ) -> Keys:
    """The user's keys (both variables), or the development defaults (neither); one alone is refused."""
    key_id, secret = environ.get("AWS_ACCESS_KEY_ID"), environ.get("AWS_SECRET_ACCESS_KEY")
    if key_id and secret:
        # The development keys, even when set (env.py fills them in as defaults for the local server).
        development = (key_id, secret) == (DEV_ACCESS_KEY_ID, DEV_SECRET_ACCESS_KEY)
        return Keys(key_id, secret, development=development)
    if key_id or secret:
        given, missing = (
            ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY") if key_id else ("AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID")
        )
        raise SystemExit(f"{given} is set but {missing} is not: set both, or neither for the development keys")
    return Keys(DEV_ACCESS_KEY_ID, DEV_SECRET_ACCESS_KEY, development=True)


def endpoint_url(environ: Mapping[str, str] = os.environ) -> str | None:
    """The S3 endpoint of the standard variables (the S3-specific one first), None for AWS itself."""
    return environ.get("AWS_ENDPOINT_URL_S3") or environ.get("AWS_ENDPOINT_URL") or None


def is_local_endpoint(environ: Mapping[str, str] = os.environ) -> bool:
    """Does the endpoint name this machine (the local server of `s3 up`), not AWS or another host?"""
    from urllib.parse import urlparse

    endpoint = endpoint_url(environ)
    return bool(endpoint) and urlparse(endpoint).hostname in ("127.0.0.1", "localhost", "::1")


def region(environ: Mapping[str, str] = os.environ) -> str:
    return environ.get("AWS_REGION") or environ.get("AWS_DEFAULT_REGION") or DEFAULT_REGION


def bucket(environ: Mapping[str, str] = os.environ) -> str:
    return environ.get("CDC_S3_BUCKET") or DEFAULT_BUCKET


def filesystem(
    endpoint: str | None, keys: Keys | None, region_name: str, attempts: int = 3, allow_bucket_creation=False
):
    """A pyarrow S3 filesystem on `endpoint` (path-style when it is not AWS), signed with `keys`
    (None: the AWS SDK's default chain, an instance profile on AWS)."""
    from pyarrow import fs

    options = {
        "region": region_name,
        "retry_strategy": fs.AwsStandardS3RetryStrategy(max_attempts=attempts),
        "allow_bucket_creation": allow_bucket_creation,
    }
    if endpoint:
        options |= {"endpoint_override": endpoint, "force_virtual_addressing": False}
    if keys is not None:
        options |= {"access_key": keys.access_key_id, "secret_key": keys.secret_access_key}
    return fs.S3FileSystem(connect_timeout=2, request_timeout=10, **options)


def filesystem_from_env(environ: Mapping[str, str] = os.environ):
    """The S3 filesystem of the standard variables, through which Python reads s3a:// and s3://
    landing files (python_hooks/project/storage.py): the endpoint, the region, and the keys of both
    variables; neither set: the development keys on a custom endpoint (the local server), the SDK's
    default chain on AWS itself. One filesystem per set of values, made once in a process."""
    endpoint = endpoint_url(environ)
    keys = keys_from_env(environ)
    return _filesystem_once(endpoint, None if keys.development and endpoint is None else keys, region(environ))


@functools.lru_cache(maxsize=8)
def _filesystem_once(endpoint: str | None, keys: Keys | None, region_name: str):
    return filesystem(endpoint, keys, region_name)


# ------------------------------------------------------------------------------------- the local server


def server_folder(environ: Mapping[str, str] = os.environ) -> Path:
    """Where the local server keeps everything: data, identities, PID, log, state (CDC_S3_DIR)."""
    return Path(environ.get("CDC_S3_DIR") or PROJECT_ROOT / "data" / "s3").resolve()


@dataclass(frozen=True)
class LocalServer:
    """What `s3 up` wrote in <folder>/state.json: where the running server answers. No secret."""

    pid: int
    endpoint_url: str
    region: str
    bucket: str
    folder: str
    access_key_id: str
    development_keys: bool


def write_state(server: LocalServer) -> Path:
    path = Path(server.folder) / STATE_FILE
    path.write_text(json.dumps(asdict(server), indent=2) + "\n", encoding="utf-8")
    return path


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def is_server_process(pid: int, folder: Path) -> bool:
    """Is `pid` alive and the `weed` serving `folder` (not another process that got the PID since)?"""
    command = _cmdline(pid)
    return "weed" in command and f"-dir={folder / 'data'}" in command


def running_server(environ: Mapping[str, str] = os.environ) -> LocalServer | None:
    """The local server of CDC_S3_DIR if its state file names a process that is that server."""
    folder = server_folder(environ)
    try:
        server = LocalServer(**json.loads((folder / STATE_FILE).read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        return None
    return server if is_server_process(server.pid, folder) else None


def shell_variables(environ: Mapping[str, str] = os.environ) -> list[tuple[str, str]]:
    """The standard variables that reach the running local server, for `env --shell`: [] when it
    does not run. The keys only when they are the development defaults (yours are in your shell)."""
    server = running_server(environ)
    if server is None:
        return []
    variables = [
        ("AWS_ENDPOINT_URL_S3", server.endpoint_url),
        ("AWS_REGION", server.region),
        ("CDC_S3_BUCKET", server.bucket),
    ]
    if server.development_keys:
        variables += [("AWS_ACCESS_KEY_ID", DEV_ACCESS_KEY_ID), ("AWS_SECRET_ACCESS_KEY", DEV_SECRET_ACCESS_KEY)]
    return variables
