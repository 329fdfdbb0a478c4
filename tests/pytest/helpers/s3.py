"""A real local S3 server for the tests (python_hooks/objectstore/: SeaweedFS's `weed mini`), started
by `python -m python_hooks s3 up` on free ports in a temp folder with a bucket of its own, the
standard variables that `s3 env` prints put in os.environ while it runs, and stopped at the end,
also when a test fails (`.ci/run` stops it if pytest itself is killed: a data/.test-s3-* file names it).
No Spark: the `s3_server` fixture (conftest.py) is what a test module asks for."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from helpers.paths import PROJECT
from python_hooks.objectstore.server import free_port
from python_hooks.project import object_store

S3_VARIABLES = ["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION"]


@dataclass
class Server:
    folder: Path
    port: int
    bucket: str
    environ: dict[str, str]  # what `s3 up` ran with
    variables: dict[str, str]  # what `s3 env` printed: the standard variables that reach it

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def free_port_block() -> int:
    """A CDC_S3_PORT whose five ports and their gRPC ports are free (python_hooks/objectstore/server.py)."""
    return free_port()


def s3_command(command: str, environ: dict[str, str], check: bool = True) -> subprocess.CompletedProcess:
    """`python -m python_hooks s3 <command>` with `environ`, from the project folder."""
    result = subprocess.run(
        [sys.executable, "-m", "python_hooks", "s3", command],
        env=environ,
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if check:
        assert result.returncode == 0, f"s3 {command}: {result.returncode}\n{result.stdout}\n{result.stderr}"
    return result


def weed_processes(folder: Path) -> list[int]:
    """Live (not zombie) processes whose command line names this server's data folder."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if f"-dir={folder / 'data'}" in command and state != "Z":
            found.append(int(proc.name))
    return found


@contextlib.contextmanager
def started_server(folder: Path, marker_name: str | None = None) -> Iterator[Server]:
    """A server with its data in `folder`, up for the `with` block, on free ports with a bucket of its
    own; os.environ untouched (Server.variables reach it). Stopped afterwards, also on failure. While it
    runs, data/<marker_name> (default .test-s3-<random>) names its folder for `.ci/run`'s clean-up."""
    marker_name = marker_name or f".test-s3-{uuid.uuid4().hex[:8]}"
    port = free_port_block()
    bucket = f"cdc-test-{uuid.uuid4().hex[:8]}"
    environ = {k: v for k, v in os.environ.items() if k not in [*S3_VARIABLES, "CDC_S3_BUCKET"]}
    environ |= {"CDC_S3_DIR": str(folder), "CDC_S3_PORT": str(port), "CDC_S3_BUCKET": bucket}
    marker = PROJECT / "data" / marker_name
    marker.parent.mkdir(exist_ok=True)
    marker.write_text(str(folder))
    try:
        s3_command("up", environ)
        printed = s3_command("env", environ).stdout.splitlines()
        variables = dict(line.removeprefix("export ").split("=", 1) for line in printed)
        yield Server(folder, port, bucket, environ, variables)
    finally:
        s3_command("down", environ, check=False)
        marker.unlink(missing_ok=True)


@contextlib.contextmanager
def server_variables(server: Server) -> Iterator[Server]:
    """The standard variables that reach `server` in os.environ for the `with` block; os.environ as it
    was afterwards."""
    saved = {name: os.environ.get(name) for name in [*S3_VARIABLES, "CDC_S3_BUCKET"]}
    try:
        for name in S3_VARIABLES:
            os.environ.pop(name, None)
        os.environ.update(server.variables)
        yield server
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def with_bucket_of_its_own(server: Server) -> Server:
    """`server` with a new bucket made on it: what a module writes never meets another module's objects."""
    from dataclasses import replace

    from python_hooks.objectstore.server import config_from_env

    bucket = f"cdc-test-{uuid.uuid4().hex[:8]}"
    config = config_from_env(server.environ)
    store = object_store.filesystem(server.endpoint, config.keys, config.region, allow_bucket_creation=True)
    store.create_dir(bucket)
    return replace(
        server,
        bucket=bucket,
        environ={**server.environ, "CDC_S3_BUCKET": bucket},
        variables={**server.variables, "CDC_S3_BUCKET": bucket},
    )


def spark_reaches(spark, server: Server) -> None:
    """The run's SparkSession reaches `server` through s3a:// paths. If it started before the server
    (a whole-suite run), the profile saw no endpoint then and the JVM's environment has no keys: the
    same S3A settings go on the session's Hadoop configuration, which S3A filesystems made from now
    on read (test_object_store.py does the same inline)."""
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    if hadoop.get("fs.s3a.endpoint") == server.endpoint:
        return
    late = {
        "fs.s3a.endpoint": server.endpoint,
        "fs.s3a.path.style.access": "true",
        "fs.s3a.access.key": server.variables["AWS_ACCESS_KEY_ID"],
        "fs.s3a.secret.key": server.variables["AWS_SECRET_ACCESS_KEY"],
    }
    for key, value in late.items():
        hadoop.set(key, value)
