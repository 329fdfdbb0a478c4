"""The landing zone on a real S3 server (SeaweedFS, the `s3_server` fixture; no Spark): one tree of
raw files on this machine's disk and the same tree uploaded to a bucket, listed and read through the
storage seam (python_hooks/project/storage.py). Whatever Python says of the local folder (which files
are raw files, their sizes, their delivery order, the empty ones, their footers, the files waiting)
it says of the s3a:// folder too; and the object store's failures come as one readable line."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyarrow import fs

from helpers.pending_warehouse import PendingWarehouse
from helpers.s3 import Server, free_port_block
from python_hooks.evolution.footers import FooterCache, read_footer
from python_hooks.landing.files import empty_files, landing_files, raw_files
from python_hooks.landing.pending import pending
from python_hooks.project import object_store
from python_hooks.project.storage import Location, StorageError
from python_hooks.project.tables import CdcTable
from python_hooks.sources.model import AddSourceError
from python_hooks.sources.raw_table import read_raw_table

pytestmark = pytest.mark.s3

TS = pa.timestamp("us")
AT = dt.datetime(2026, 11, 25, 10, 0)


def _dms(path: Path, rows: list[dict], schema: pa.Schema) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)


def _landing_tree(root: Path) -> dict[str, str]:
    """Two tables' raw folders with what producers and tools leave beside raw files; {table: folder}."""
    dms = root / "dms" / "crm" / "customer"
    load = pa.schema([("id", pa.int32()), ("name", pa.string()), ("last_update_time", TS)])
    cdc = pa.schema([("Op", pa.string()), ("id", pa.int64()), ("name", pa.string()), ("last_update_time", TS)])
    wider = cdc.append(pa.field("country", pa.string()))
    _dms(dms / "LOAD00000001.parquet", [{"id": 1, "name": "ada", "last_update_time": AT}], load)
    _dms(dms / "2026/11/26/20261126-090000000.parquet", [{"Op": "U", "id": 1, "last_update_time": AT}], wider)
    _dms(dms / "2026/11/25/20261125-100000000.parquet", [{"Op": "I", "id": 2, "last_update_time": AT}], cdc)
    _dms(dms / "_tmp/20261127-000000000.parquet", [{"Op": "I", "id": 3, "last_update_time": AT}], cdc)  # hidden
    _dms(dms / ".x.parquet", [{"Op": "I", "id": 4, "last_update_time": AT}], cdc)  # hidden
    (dms / "2026/11/27").mkdir(parents=True)
    (dms / "2026/11/27/20261127-080000000.parquet").write_bytes(b"")  # an upload in progress
    (dms / "_SUCCESS").write_bytes(b"")
    (dms / "notes.txt").write_text("not a raw file")
    topic = root / "debezium" / "topics" / "crm.public.orders"
    envelope = pa.schema([("__op", pa.string()), ("order_id", pa.int64()), ("__source_ts_ms", pa.int64())])
    for offset in (10, 9, 0):
        row = {"__op": "c", "order_id": offset, "__source_ts_ms": 1_764_064_800_000 + offset}
        _dms(topic / f"partition=0/crm.public.orders+0+{offset}.snappy.parquet", [row], envelope)
    return {"customer": "dms/crm/customer", "orders": "debezium/topics/crm.public.orders"}


def _upload(local: Path, s3: fs.FileSystem, prefix: str) -> int:
    """Every file of `local` as an object under `prefix` (0-byte ones too); how many."""
    count = 0
    for path in sorted(p for p in local.rglob("*") if p.is_file()):
        with s3.open_output_stream(f"{prefix}/{path.relative_to(local).as_posix()}") as out:
            out.write(path.read_bytes())
        count += 1
    return count


@pytest.fixture(scope="module")
def landing(s3_server: Server, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, dict[str, str]]:
    """(local root, the same tree's s3a:// root, {table: folder under either root})."""
    root = tmp_path_factory.mktemp("landing")
    folders = _landing_tree(root)
    prefix = f"{s3_server.bucket}/landing"
    assert _upload(root, object_store.filesystem_from_env(), prefix) == 11
    return root, f"s3a://{prefix}", folders


def _described(files) -> list[tuple[str, str, int]]:
    return [(file.relative, file.name, file.size) for file in files]


@pytest.mark.parametrize("table", ["customer", "orders"])
def test_an_s3_folder_lists_as_its_local_copy_same_raw_files_sizes_order_and_empty_files(landing, table):
    root, s3_root, folders = landing
    local, remote = root / folders[table], f"{s3_root}/{folders[table]}"
    producer = "dms" if table == "customer" else "debezium"
    assert _described(raw_files(remote, producer)) == _described(raw_files(local, producer))
    assert sorted(_described(landing_files(remote))) == sorted(_described(landing_files(local)))
    assert _described(empty_files(remote)) == _described(empty_files(local))
    assert all(str(file).startswith(remote + "/") and file.mtime_ns > 0 for file in landing_files(remote))
    if table == "customer":
        assert [file.relative for file in raw_files(remote, "dms")] == [
            "LOAD00000001.parquet",
            "2026/11/25/20261125-100000000.parquet",
            "2026/11/26/20261126-090000000.parquet",
            "2026/11/27/20261127-080000000.parquet",
        ]
        assert [file.relative for file in empty_files(remote)] == ["2026/11/27/20261127-080000000.parquet"]
    else:
        assert [file.name for file in raw_files(remote, "debezium")] == [
            f"crm.public.orders+0+{offset}.snappy.parquet" for offset in (0, 9, 10)
        ]
    # s3:// names the same objects as s3a://, and keeps its own scheme
    plain = remote.replace("s3a://", "s3://", 1)
    assert [str(f) for f in raw_files(plain, producer)] == [
        str(f).replace("s3a", "s3", 1) for f in raw_files(remote, producer)
    ]


def test_footers_on_s3_equal_the_local_ones_and_the_cache_reads_each_once(landing, tmp_path, monkeypatch):
    root, s3_root, folders = landing
    local, remote = root / folders["customer"], f"{s3_root}/{folders['customer']}"
    readable = [f for f in raw_files(remote, "dms") if f.size]
    for file in readable:
        assert read_footer(file) == read_footer(local / file.relative)
    reads: list[str] = []
    real = pq.read_schema

    def counting(where, *args, **kwargs):
        reads.append(str(where))
        return real(where, *args, **kwargs)

    monkeypatch.setattr(pq, "read_schema", counting)
    cache = FooterCache(tmp_path / "footer_cache.json")
    on_s3 = cache.union_schema(remote, readable)
    assert on_s3 == FooterCache(tmp_path / "local.json").union_schema(
        str(local), [local / f.relative for f in readable]
    )
    assert on_s3.schema.names == ["id", "name", "last_update_time", "Op", "country"]
    assert len(reads) == 2 * len(readable)  # each footer once per cache
    cache.save()
    reads.clear()
    assert FooterCache(tmp_path / "footer_cache.json").union_schema(remote, raw_files(remote, "dms")[:-1]) == on_s3
    assert reads == []  # the saved cache knows the objects by their s3a:// names, sizes and times
    assert sorted(cache.file_types(remote)) == sorted(str(f) for f in readable)


def test_add_source_reads_the_same_raw_table_from_s3_and_refuses_the_same_empty_file(landing):
    root, s3_root, folders = landing
    topic = folders["orders"]
    on_disk = read_raw_table("debezium", Location.parse(root / topic), ["order_id"], None, "crm.orders")
    on_s3 = read_raw_table("debezium", Location.parse(f"{s3_root}/{topic}"), ["order_id"], None, "crm.orders")
    assert (on_s3.shape, on_s3.columns) == (on_disk.shape, on_disk.columns) and on_s3.shape == "flattened"
    assert [f.relative for f in on_s3.files] == [f.relative for f in on_disk.files]
    for folder in (str(root / folders["customer"]), f"{s3_root}/{folders['customer']}"):
        empty = f"{folder}/2026/11/27/20261127-080000000.parquet"
        with pytest.raises(
            AddSourceError, match=f"crm.customer: cannot read the Parquet footer of {re.escape(empty)}: "
        ):
            read_raw_table("dms", Location.parse(folder), ["id"], "last_update_time", "crm.customer")


def test_files_waiting_in_an_s3_folder_are_listed_in_python_not_by_a_listing_table(landing):
    root, s3_root, folders = landing
    remote = f"{s3_root}/{folders['customer']}"
    table = CdcTable(
        model="customer",
        schema="lake",
        identifier="customer",
        staging_model="stg_customer",
        source="crm.customer",
        folder=Location.parse(remote),
        producer="dms",
        timestamp_column="last_update_time",
        source_name="crm",
        table_name="customer",
        landing=remote,
    )
    warehouse = PendingWarehouse(
        {("lake", "customer"), ("lake_cdc_meta", "cdc_file_ledger")}, [("customer", "LOAD00000001.parquet")]
    )
    waiting = pending(warehouse, [table])
    assert waiting.counts == {"customer": 3}
    files = [
        ["20261125-100000000.parquet", "2026/11/25/20261125-100000000.parquet"],
        ["20261126-090000000.parquet", "2026/11/26/20261126-090000000.parquet"],
        ["20261127-080000000.parquet", "2026/11/27/20261127-080000000.parquet"],
    ]
    size = sum((root / folders["customer"] / relative).stat().st_size for _, relative in files)  # the local copies
    assert waiting.plan == {"customer": {"folder": remote, "files": files, "bytes": size}}
    assert len(warehouse.queries) == 1 and "landing__" not in warehouse.queries[0]  # the ledger, no listing table


def test_object_store_failures_are_one_line_naming_what_to_check(s3_server: Server, landing, monkeypatch):
    _, s3_root, folders = landing
    folder = f"{s3_root}/{folders['customer']}"
    with pytest.raises(StorageError) as missing:
        landing_files(f"s3a://no-such-bucket-{s3_server.bucket}/landing")
    assert str(missing.value).startswith(
        f"bucket no-such-bucket-{s3_server.bucket} does not exist at {s3_server.endpoint}"
    )
    assert landing_files(f"{s3_root}/no/such/folder") == []  # a folder with no file yet, in a bucket that exists

    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    with pytest.raises(StorageError) as refused:
        landing_files(folder)
    said = str(refused.value)
    assert f"S3 at {s3_server.endpoint} refused bucket {s3_server.bucket}" in said and "AWS_ACCESS_KEY_ID" in said
    assert "not-the-secret" not in said and "\n" not in said

    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3_server.variables["AWS_SECRET_ACCESS_KEY"])
    down = f"http://127.0.0.1:{free_port_block()}"
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", down)
    with pytest.raises(StorageError) as unreachable:
        landing_files(folder)
    assert str(unreachable.value).startswith(
        f"S3 at {down} does not answer (reading {folder}): check AWS_ENDPOINT_URL_S3"
    )
