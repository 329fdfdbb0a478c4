"""BENCH_STORAGE without Spark or a server: the setting, where the results go, the batch's files as
the hand-written job reads them, and where a generated file lands (bench/storage.py, bench/report.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.baseline import batch_files
from bench.context import Settings
from bench.harness import landed_path
from bench.report import result_names
from bench.storage import local_storage
from python_hooks.project.storage import Location


def test_storage_setting_defaults_to_local_and_takes_s3():
    assert Settings.from_env({}).storage == "local"
    assert Settings.from_env({"BENCH_STORAGE": "s3"}).storage == "s3"


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"BENCH_STORAGE": "gcs"}, "BENCH_STORAGE must be one of local, s3"),
        ({"BENCH_STORAGE": "s3", "BENCH_TARGET": "cluster"}, "local target only"),
    ],
)
def test_storage_setting_refuses_what_it_cannot_run(environ, message):
    with pytest.raises(ValueError, match=message):
        Settings.from_env(environ)


def test_results_of_an_s3_run_never_overwrite_the_local_ones():
    assert result_names("local") == ("latest.json", "latest.md")
    assert result_names("local", "s3") == ("latest-s3.json", "latest-s3.md")
    assert result_names("cluster") == ("latest-cluster.json", "latest-cluster.md")
    assert result_names("cluster", "s3") == ("latest-cluster-s3.json", "latest-cluster-s3.md")


def test_the_handwritten_job_reads_the_batch_where_it_landed(tmp_path):
    on_s3 = Location.parse("s3a://cdc-bench/landing/dms/bench/orders")
    files = [on_s3.join("20261101-000000100.parquet"), on_s3.join("20261101-000000200.parquet")]
    assert batch_files(files) == (
        "s3a://cdc-bench/landing/dms/bench/orders/{20261101-000000100.parquet,20261101-000000200.parquet}"
    )
    local = local_storage(tmp_path).landing.join("dms/bench/orders")
    assert (
        batch_files([local.join("LOAD00000001.parquet")]) == f"{tmp_path}/landing/dms/bench/orders/LOAD00000001.parquet"
    )
    with pytest.raises(ValueError, match="one folder"):
        batch_files([files[0], local.join("LOAD00000001.parquet")])


def test_a_generated_file_lands_under_the_same_name_in_its_dated_folder():
    folder = Location.parse("s3a://cdc-bench/landing/dms/bench/history")
    assert str(landed_path(Path("/out/20261030-235900000.parquet"), folder, "dated")) == (
        "s3a://cdc-bench/landing/dms/bench/history/2026/10/30/20261030-235900000.parquet"
    )
    assert str(landed_path(Path("/out/LOAD00000001.parquet"), folder, "dated")) == (
        "s3a://cdc-bench/landing/dms/bench/history/LOAD00000001.parquet"
    )
