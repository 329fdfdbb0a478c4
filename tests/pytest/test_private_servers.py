"""The servers the project starts for itself (python_hooks/project/postgres.py: the metastore's and the live
source's PostgreSQL; python_hooks/objectstore/server.py: the S3 server) from folders a new user has: one
inside a 0700 folder (what `mktemp -d` and /root give), one that cannot be written. Each works, or is
refused in one sentence naming the folder and what to do; never a traceback. Real servers, no Spark.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from python_hooks.objectstore import server as s3
from python_hooks.project import object_store, postgres
from python_hooks.project.postgres import PrivatePostgres

ROOT = os.geteuid() == 0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _server(folder: Path) -> PrivatePostgres:
    return PrivatePostgres(
        name="test postgres",
        pgdata=folder / "postgres",
        port=_free_port(),
        socket_dir=folder / "run",
        log_file=folder / "logs" / "postgres.log",
        pid_file=folder / "run" / "postgres.pid",
        port_variable="TEST_PG_PORT",
        folder_variable="TEST_PG_DIR",
    )


@pytest.fixture
def private_folder() -> Iterator[Path]:
    """`mktemp -d`: a 0700 folder in /tmp, owned by the user running the tests."""
    folder = Path(tempfile.mkdtemp(prefix="cdc-test-0700-"))
    assert folder.stat().st_mode & 0o777 == 0o700
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _refusal(error: pytest.ExceptionInfo[SystemExit]) -> str:
    message = str(error.value.code)
    assert "\n" not in message and "Traceback" not in message, message
    return message


def test_postgres_in_a_0700_folder_starts_or_is_refused_in_one_sentence(private_folder: Path) -> None:
    clone = private_folder / "clone" / "data" / "live"
    server = _server(clone)
    if ROOT:  # PostgreSQL runs as `postgres`, who cannot enter the 0700 folder: refused before anything starts
        with pytest.raises(SystemExit) as error:
            postgres.start(server)
        message = _refusal(error)
        for part in (
            "test postgres",
            f"cannot enter {private_folder} (mode 0700, owner root)",
            f"chmod o+x {private_folder}",
            "TEST_PG_DIR",
        ):
            assert part in message, message
        assert not (server.pgdata / "PG_VERSION").exists() and postgres.running_pid(server) is None
        private_folder.chmod(0o711)  # what the sentence says to do: then it starts
    postgres.start(server)
    try:
        assert postgres.psql(server, "select 6 * 7") == "42"
    finally:
        postgres.stop(server)
    assert postgres.running_pid(server) is None


def test_postgres_folder_that_cannot_be_made_is_refused_in_one_sentence(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    server = _server(blocker / "live")
    with pytest.raises(SystemExit) as error:
        postgres.start(server)
    message = _refusal(error)
    assert "test postgres: cannot make its folders" in message and str(blocker) in message, message
    assert "TEST_PG_DIR" in message, message


def test_a_failed_initdb_is_one_line_with_its_log(private_folder: Path) -> None:
    private_folder.chmod(0o755)
    server = _server(private_folder)
    server.pgdata.mkdir(parents=True)
    (server.pgdata / "not-empty").write_text("initdb refuses a folder that holds files")
    with pytest.raises(SystemExit) as error:
        postgres.start(server)
    message = _refusal(error)
    assert message.startswith("test postgres: initdb failed (exit status 1): ") and str(server.log_file) in message
    assert str(server.pgdata) in message, message  # initdb's own words, from the log, name the folder


def test_s3_server_in_a_0700_folder_starts(private_folder: Path) -> None:
    """The S3 server runs as the user who starts it: a 0700 folder of that user is fine."""
    config = s3.config_from_env(
        {"CDC_S3_DIR": str(private_folder / "clone" / "data" / "s3"), "CDC_S3_PORT": str(s3.free_port())}
    )
    try:
        s3.up(config)
        assert s3.status(config)
        assert object_store.running_server({"CDC_S3_DIR": str(config.folder)}) is not None
    finally:
        s3.down(config)


def test_s3_server_folder_that_cannot_be_made_is_refused_in_one_sentence(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    config = s3.config_from_env({"CDC_S3_DIR": str(blocker / "s3"), "CDC_S3_PORT": str(s3.free_port())})
    with pytest.raises(SystemExit) as error:
        s3.up(config)
    message = _refusal(error)
    assert str(blocker) in message and "CDC_S3_DIR" in message, message
