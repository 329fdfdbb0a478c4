"""The local S3 server (`make s3-up|s3-down|s3-status`, python_hooks/objectstore/): a real SeaweedFS,
started by `python -m python_hooks s3 up` on free ports in a temp folder with its own bucket, stopped
at the end also when a test fails (the `s3_server` fixture, helpers/s3.py). Clients reach it through
the standard AWS variables only (what `s3 env` prints): pyarrow, and the test run's SparkSession with
s3a:// paths, Parquet and Iceberg."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers.paths import PROJECT
from helpers.s3 import Server, s3_command, server_variables, started_server, weed_processes
from python_hooks.project import object_store

pytestmark = pytest.mark.s3


pytestmark = pytest.mark.s3


@pytest.fixture(scope="module")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server of this module's own, not the run's shared one: these tests start it again and stop it."""
    with started_server(tmp_path_factory.mktemp("s3-own")) as server, server_variables(server):
        yield server


def test_up_twice_is_harmless_and_status_and_env_say_where(s3_server: Server):
    assert s3_server.variables == {
        "AWS_ENDPOINT_URL_S3": s3_server.endpoint,
        "AWS_REGION": "us-east-1",
        "CDC_S3_BUCKET": s3_server.bucket,
        "AWS_ACCESS_KEY_ID": object_store.DEV_ACCESS_KEY_ID,  # no key in the environment: the development ones
        "AWS_SECRET_ACCESS_KEY": object_store.DEV_SECRET_ACCESS_KEY,
    }
    [pid] = weed_processes(s3_server.folder)
    again = s3_command("up", s3_server.environ)
    assert f"s3: already running at {s3_server.endpoint} (pid {pid})" in again.stderr
    assert "development keys" in again.stderr
    assert weed_processes(s3_server.folder) == [pid]
    status = s3_command("status", s3_server.environ)
    assert f"running at {s3_server.endpoint} (pid {pid})" in status.stderr
    assert f"bucket {s3_server.bucket}: exists" in status.stderr
    # Bound to 127.0.0.1 only: the S3 port answers there and nowhere else.
    s3_port = f"{s3_server.port:04X}"
    sockets = [line.split() for line in Path("/proc/net/tcp").read_text().splitlines()[1:]]
    local = [fields[1] for fields in sockets if fields[1].endswith(f":{s3_port}") and fields[3] == "0A"]  # LISTEN
    assert local == ["0100007F:" + s3_port], local
    # `env --shell` ends with the same variables; the identities file is its owner's only.
    shell = subprocess.run(
        [sys.executable, "-m", "python_hooks", "env", "--shell"],
        env=s3_server.environ,
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert shell.stdout.splitlines()[-5:] == [f"{k}={v}" for k, v in s3_server.variables.items()]
    assert (s3_server.folder / "s3.json").stat().st_mode & 0o077 == 0


def test_the_bucket_round_trips_through_the_standard_variables_and_refuses_other_keys(s3_server: Server):
    from pyarrow import fs

    s3, path = fs.FileSystem.from_uri(f"s3://{s3_server.bucket}/round-trip/hello.txt")  # AWS_* from os.environ
    assert s3.get_file_info(s3_server.bucket).type == fs.FileType.Directory
    payload = uuid.uuid4().bytes * 1000
    with s3.open_output_stream(path) as out:
        out.write(payload)
    with s3.open_input_stream(path) as back:
        assert back.read() == payload
    listed = s3.get_file_info(fs.FileSelector(f"{s3_server.bucket}/round-trip"))
    assert [(info.path, info.size) for info in listed] == [(path, len(payload))]
    wrong = fs.S3FileSystem(
        access_key=object_store.DEV_ACCESS_KEY_ID,
        secret_key="not-the-secret",
        endpoint_override=s3_server.endpoint,
        region="us-east-1",
        retry_strategy=fs.AwsStandardS3RetryStrategy(max_attempts=1),
    )
    with pytest.raises(OSError, match="ACCESS_DENIED"):
        wrong.get_file_info(s3_server.bucket)


def test_spark_writes_parquet_and_an_iceberg_table_on_s3a_and_reads_them_back(s3_server: Server, spark, schema):
    """The SparkSession of the run (dbt's, from profiles/profiles.yml). If it started before this module
    (a whole-suite run), the profile saw no endpoint then: the same S3A settings are set at run time
    on the session's Hadoop configuration, which S3A filesystems made from now on read."""
    from pyarrow import fs

    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    if hadoop.get("fs.s3a.endpoint") != s3_server.endpoint:
        late = {
            "fs.s3a.endpoint": s3_server.endpoint,
            "fs.s3a.path.style.access": "true",
            "fs.s3a.access.key": s3_server.variables["AWS_ACCESS_KEY_ID"],
            "fs.s3a.secret.key": s3_server.variables["AWS_SECRET_ACCESS_KEY"],
        }
        for key, value in late.items():
            hadoop.set(key, value)
    else:
        assert hadoop.get("fs.s3a.path.style.access") == "true"  # the profile's, from AWS_ENDPOINT_URL_S3

    root = f"s3a://{s3_server.bucket}/{schema}"
    rows = [(1, "ada", 10.5), (2, "grace", None), (3, "émilie", -1.25)]
    frame = spark.createDataFrame(rows, "id bigint, name string, amount double")
    frame.write.parquet(f"{root}/parquet")
    back = spark.read.parquet(f"{root}/parquet")
    assert sorted(tuple(row) for row in back.collect()) == rows

    spark.sql(f"create database if not exists {schema}")
    try:
        spark.sql(
            f"create table {schema}.on_s3 (id bigint, name string, amount double) using iceberg "
            f"location '{root}/iceberg/on_s3'"
        )
        frame.writeTo(f"{schema}.on_s3").append()
        spark.sql(f"update {schema}.on_s3 set amount = 0.0 where id = 2")
        table = sorted(tuple(row) for row in spark.table(f"{schema}.on_s3").collect())
        assert table == [(1, "ada", 10.5), (2, "grace", 0.0), (3, "émilie", -1.25)]
        location = spark.sql(f"describe table extended {schema}.on_s3").where("col_name = 'Location'").first()
        assert location.data_type == f"{root}/iceberg/on_s3"
    finally:
        spark.sql(f"drop table if exists {schema}.on_s3")  # not purge: its files are checked below
        spark.sql(f"drop database if exists {schema} cascade")

    # The files are on the object store, seen through pyarrow and the standard variables, not Spark.
    s3, prefix = fs.FileSystem.from_uri(f"s3://{s3_server.bucket}/{schema}")
    names = [info.path.removeprefix(prefix + "/") for info in s3.get_file_info(fs.FileSelector(prefix, recursive=True))]
    assert any(name.startswith("parquet/part-") and name.endswith(".parquet") for name in names), names
    assert any(name.startswith("iceberg/on_s3/metadata/") and name.endswith(".metadata.json") for name in names)
    assert any(name.startswith("iceberg/on_s3/data/") and name.endswith(".parquet") for name in names), names


def test_down_stops_it_by_pid_and_is_harmless_twice(s3_server: Server):
    assert weed_processes(s3_server.folder)
    s3_command("down", s3_server.environ)
    deadline = time.monotonic() + 10
    while weed_processes(s3_server.folder) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert weed_processes(s3_server.folder) == []
    again = s3_command("down", s3_server.environ)
    assert "s3: not running" in again.stderr
    status = s3_command("status", s3_server.environ, check=False)
    assert status.returncode == 1 and "s3: not running" in status.stderr
    assert not (s3_server.folder / "state.json").exists()
