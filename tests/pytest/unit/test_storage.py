"""The storage seam (python_hooks/project/storage.py) on this machine's disk: landing strings parsed
and written back, folders listed with sizes and times, files opened and replaced whole; S3's failures
said in one line.
The same seam against a real S3 server: tests/pytest/test_storage_s3.py."""

from __future__ import annotations

import pytest

from python_hooks.project import object_store
from python_hooks.project.storage import Location, StorageError, StoredFile, failure_in, location


@pytest.mark.parametrize(
    ("text", "prefix", "path", "written"),
    [
        ("/data/landing/dms/", "", "/data/landing/dms", "/data/landing/dms"),
        ("/data//landing", "", "/data/landing", "/data/landing"),
        ("file:/data/landing/", "file:", "/data/landing", "file:/data/landing"),
        ("file:///data/landing", "file://", "/data/landing", "file:///data/landing"),
        ("s3a://bucket/landing/dms/", "s3a://", "bucket/landing/dms", "s3a://bucket/landing/dms"),
        ("s3://bucket", "s3://", "bucket", "s3://bucket"),
        ("gs://bucket/landing", "gs://", "bucket/landing", "gs://bucket/landing"),
    ],
)
def test_a_landing_string_keeps_its_scheme_and_gives_the_path_inside_its_filesystem(text, prefix, path, written):
    where = Location.parse(text)
    assert (where.prefix, where.path, str(where)) == (prefix, path, written)
    assert Location.parse(str(where)) == where  # the string form parses back to the same place


def test_what_python_reaches_and_what_it_leaves_to_spark():
    assert Location.parse("/x").is_local and Location.parse("file:/x").is_local
    assert Location.parse("s3a://b/x").is_s3 and Location.parse("s3a://b/x").bucket == "b"
    assert all(Location.parse(t).reachable for t in ("/x", "file:/x", "s3a://b/x", "s3://b/x"))
    unreachable = Location.parse("abfss://c@account.dfs.core.windows.net/x")
    assert not unreachable.reachable
    with pytest.raises(StorageError, match="abfss://c@account.dfs.core.windows.net/x: Python reads local paths"):
        unreachable.files()
    with pytest.raises(StorageError, match="names its bucket"):
        Location.parse("s3a:///landing")
    with pytest.raises(ValueError, match="s3a://b/x is not on this machine's disk"):
        _ = Location.parse("s3a://b/x").local_path


def test_join_and_relative_to_stay_in_the_same_store():
    folder = Location.parse("s3a://bucket/landing/dms/crm/customer")
    file = folder.join("2026/11/25/20261125-1.parquet")
    assert str(file) == "s3a://bucket/landing/dms/crm/customer/2026/11/25/20261125-1.parquet"
    assert file.name == "20261125-1.parquet"
    assert file.relative_to(folder) == file.relative_to(str(folder)) == "2026/11/25/20261125-1.parquet"
    assert Location.parse("/a/b/c.parquet").relative_to("file:/a") == "b/c.parquet"  # both on this machine
    for outside in ("s3a://bucket/landing/dms/crm/customer_x", "s3://bucket/landing/dms/crm/customer"):
        with pytest.raises(ValueError, match="is not inside"):
            Location.parse(outside + "/f.parquet").relative_to(folder)


def test_a_local_folder_is_listed_recursively_with_sizes_and_times_as_the_disk_says(tmp_path):
    for name, size in {"LOAD1.parquet": 5, "2026/11/25/c1.parquet": 0, "_tmp/x.parquet": 3, ".y": 1}.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"x" * size)
    listed = {file.relative: file for file in Location.parse(tmp_path).files()}
    assert sorted(listed) == [".y", "2026/11/25/c1.parquet", "LOAD1.parquet", "_tmp/x.parquet"]  # every file
    for relative, file in listed.items():
        stat = (tmp_path / relative).stat()
        assert (file.size, file.mtime_ns) == (stat.st_size, stat.st_mtime_ns)
        assert str(file) == str(tmp_path / relative) and file.name == relative.rsplit("/", 1)[-1]
    assert Location.parse(f"file://{tmp_path}").files()[0].relative in listed  # a file: URI lists the same
    assert Location.parse(tmp_path / "missing").files() == []
    assert Location.parse(tmp_path / "LOAD1.parquet").files() == []  # a file is no folder


def test_a_file_is_described_and_opened_through_its_location(tmp_path):
    (tmp_path / "a.parquet").write_bytes(b"PAR1 not really")
    where = location(tmp_path / "a.parquet")
    found = where.info()
    assert isinstance(found, StoredFile) and found.size == 15 and location(found) is where
    with where.open() as stream:
        assert stream.read() == b"PAR1 not really"
    assert Location.parse(tmp_path / "gone.parquet").info() is None
    with pytest.raises(StorageError, match="gone.parquet"):
        Location.parse(tmp_path / "gone.parquet").open()


def test_a_file_is_replaced_whole_under_its_name_with_nothing_left_beside(tmp_path):
    folder = tmp_path / "2026" / "11"
    folder.mkdir(parents=True)
    (folder / "a.parquet").write_bytes(b"old content, longer than the new")
    location(f"file://{folder / 'a.parquet'}").write_bytes(b"new content")
    assert (folder / "a.parquet").read_bytes() == b"new content"
    assert [p.name for p in folder.iterdir()] == ["a.parquet"]  # the hidden staged copy was renamed over it
    with pytest.raises(StorageError, match=r"^cannot write .*/missing/b.parquet: ") as failed:
        Location.parse(tmp_path / "missing" / "b.parquet").write_bytes(b"x")
    assert "\n" not in str(failed.value) and not (tmp_path / "missing").exists()


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (
            "When listing objects under key 'x/' in bucket 'lake': AWS Error SIGNATURE_DOES_NOT_MATCH during"
            " ListObjectsV2 operation: The request signature we calculated does not match",
            "S3 at http://127.0.0.1:9 refused bucket lake (SIGNATURE_DOES_NOT_MATCH) with the keys of"
            " AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY: check both variables (and AWS_REGION)",
        ),
        (
            "When listing objects under key 'x/' in bucket 'lake': AWS Error NETWORK_CONNECTION during"
            " ListObjectsV2 operation: curlCode: 7, Couldn't connect to server",
            "S3 at http://127.0.0.1:9 does not answer (reading s3a://lake/x): check AWS_ENDPOINT_URL_S3 (or"
            " AWS_ENDPOINT_URL); for the local server, make s3-up",
        ),
        (
            "AWS Error NO_SUCH_BUCKET during GetObject operation",
            "bucket lake does not exist at http://127.0.0.1:9 (reading s3a://lake/x): check the landing root",
        ),
    ],
    ids=["keys-refused", "endpoint-down", "no-bucket"],
)
def test_an_s3_failure_is_one_line_naming_endpoint_bucket_and_variable(monkeypatch, answer, said):
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "the-secret-value")
    message = str(Location.parse("s3a://lake/x").failure(OSError(answer + "\nsecond line")))
    assert message.startswith(said) and "\n" not in message and "the-secret-value" not in message


def test_the_s3_filesystem_comes_from_the_standard_variables_once_per_set_of_values():
    local = {"AWS_ENDPOINT_URL_S3": "http://127.0.0.1:9", "AWS_REGION": "eu-west-3"}
    first = object_store.filesystem_from_env(local)
    assert first is object_store.filesystem_from_env(dict(local)) and first.region == "eu-west-3"
    assert first is not object_store.filesystem_from_env({**local, "AWS_REGION": "eu-west-1"})
    with pytest.raises(SystemExit, match="AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not"):
        object_store.filesystem_from_env({**local, "AWS_ACCESS_KEY_ID": "id-1"})


# What Spark's S3A said (Hadoop 3.3's messages, met by a real run on SeaweedFS), inside what dbt reports.
S3A = {
    "keys-refused": (
        "java.nio.file.AccessDeniedException: s3a://lake/warehouse/s_cdc_meta.db: getFileStatus on"
        " s3a://lake/warehouse/s_cdc_meta.db: com.amazonaws.services.s3.model.AmazonS3Exception: Forbidden"
        " (Service: Amazon S3; Status Code: 403; Error Code: 403 Forbidden; Request ID: 18EB)",
        "S3 at http://127.0.0.1:9 refused bucket lake (AccessDenied) with the keys of AWS_ACCESS_KEY_ID /"
        " AWS_SECRET_ACCESS_KEY: check both variables (and AWS_REGION)",
    ),
    "endpoint-down": (
        ": org.apache.hadoop.fs.s3a.AWSClientIOException: getFileStatus on s3a://lake/landing/dms/crm/t:"
        " com.amazonaws.SdkClientException: Unable to execute HTTP request: Connect to 127.0.0.1:9"
        " [/127.0.0.1] failed: Connection refused",
        "S3 at http://127.0.0.1:9 does not answer (reading s3a://lake/landing/dms/crm/t): check"
        " AWS_ENDPOINT_URL_S3 (or AWS_ENDPOINT_URL); for the local server, make s3-up",
    ),
    "no-bucket": (
        ": org.apache.hadoop.fs.s3a.UnknownStoreException: `s3a://lake/landing/dms/crm/t': getFileStatus on"
        " s3a://lake/landing/dms/crm/t: com.amazonaws.services.s3.model.AmazonS3Exception: The specified"
        " bucket does not exist (Service: Amazon S3; Status Code: 404; Error Code: NoSuchBucket)",
        "bucket lake does not exist at http://127.0.0.1:9 (reading s3a://lake/landing/dms/crm/t): check the"
        " landing root (CDC_LANDING_ROOT, or the source's identifier) and CDC_S3_BUCKET, or create the bucket",
    ),
    "file-gone": (
        "[PATH_NOT_FOUND] Path does not exist: s3a://lake/landing/dms/crm/t/20261102-091500000.parquet.",
        "s3a://lake/landing/dms/crm/t/20261102-091500000.parquet was listed, then gone when read: deleted"
        " meanwhile (a lifecycle rule, or its producer); nothing read from it was applied",
    ),
}


@pytest.mark.parametrize(("spark_said", "said"), list(S3A.values()), ids=list(S3A))
def test_what_spark_says_of_an_s3_failure_is_said_in_the_same_words(monkeypatch, spark_said, said):
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9")
    monkeypatch.setenv("CDC_WAREHOUSE", "/tmp/warehouse")
    message = f"Runtime Error in model t (models/t.sql)\n  {spark_said}\n\tat org.apache.hadoop.fs.s3a.S3AUtils"
    assert str(failure_in(message)) == said


def test_a_missing_bucket_under_the_warehouse_names_the_warehouse(monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9")
    monkeypatch.setenv("CDC_WAREHOUSE", "s3a://lake/warehouse")
    said = str(failure_in("UnknownStoreException: s3a://lake/warehouse/s_current.db: NoSuchBucket"))
    assert said.startswith("bucket lake does not exist") and "check the warehouse (CDC_WAREHOUSE)" in said


def test_a_spark_error_that_is_no_s3_failure_is_left_as_it_is():
    assert failure_in("[PATH_NOT_FOUND] Path does not exist: s3a://lake/landing/dms/crm/t.") is None  # a folder
    assert failure_in("Connection refused: thrift://127.0.0.1:10009") is None
    assert failure_in("cdc_current_state refused the batch: raw file x.parquet: a null key") is None
