"""Erasure and rectification of raw landing files on a real S3 server (SeaweedFS, the `s3_server`
fixture; no Spark) and, the same scenario, on this machine's disk: a DMS folder and a Debezium
envelope folder, rewritten through the storage seam by the helpers `erase` and `rectify` run
(python_hooks/personal_data/raw_files.py). Afterwards every object under the bucket (every file
under the local root) is read back with pyarrow, apart from the seam: none holds the subject, the
names are the same, every other row is as it was (an expectation computed from the input rows)."""

from __future__ import annotations

import datetime as dt
import uuid

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyarrow import fs

from helpers.s3 import Server, free_port_block
from python_hooks.personal_data import ErasureError, Holder, rectify_raw_file, scrub_raw_file
from python_hooks.personal_data.raw_files import raw_folder_files, raw_personal_values
from python_hooks.project.storage import Location, StorageError

pytestmark = pytest.mark.s3

TS = pa.timestamp("us", tz="UTC")
START = dt.datetime(2026, 11, 25, 10, 0, tzinfo=dt.timezone.utc)
ERASED = ["42", "77"]  # the erased subject's keys (no other test of this module writes them)
RECTIFIED = "5"
OTHER = "8"  # the subject of the failure tests
LOAD_SCHEMA = pa.schema([("CUSTOMER_ID", pa.int64()), ("email", pa.string()), ("last_update_time", TS)])
CDC_SCHEMA = pa.schema([("Op", pa.string()), *LOAD_SCHEMA])
IMAGE = pa.struct([("id", pa.int32()), ("name", pa.string()), ("email", pa.string())])
ENVELOPE_SCHEMA = pa.schema([("before", IMAGE), ("after", IMAGE), ("op", pa.string()), ("ts_ms", pa.int64())])


def _dms_rows(ids: list[int], start: int, op: str | None, tag: str) -> list[dict]:
    rows = []
    for n, customer in enumerate(ids):
        row = {
            "CUSTOMER_ID": customer,
            "email": None if n % 5 == 4 else f"{tag}-{customer}-{start + n}@example.com",
            "last_update_time": START + dt.timedelta(seconds=start + n),
        }
        rows.append(row if op is None else {"Op": "D" if n % 7 == 6 else op, **row})
    return rows


def _envelope_rows(pairs: list[tuple[int | None, int | None]], start: int, tag: str) -> list[dict]:
    """One event per (before id, after id): c (no before), d (no after), u (both; a key may change)."""

    def image(customer, n, side):
        return (
            None
            if customer is None
            else {"id": customer, "name": f"{tag} {side} {n}", "email": f"{tag}-{customer}-{n}@x"}
        )

    rows = []
    for n, (before, after) in enumerate(pairs, start=start):
        op = "c" if before is None else "d" if after is None else "u"
        rows.append(
            {"before": image(before, n, "b"), "after": image(after, n, "a"), "op": op, "ts_ms": 1_764_064_800_000 + n}
        )
    return rows


def _files(tag: str, keys: list[int]) -> dict[str, tuple[str, str, list[dict], pa.Schema, str]]:
    """{relative path: (folder, producer, rows, schema, compression)} of one landing tree: a DMS
    table with a full load and CDC files in date folders, a Debezium envelope topic."""
    other = [1, 2, 3, 4, 5, 6]
    mixed = [customer for pair in zip(other, keys * 3, strict=False) for customer in pair] + other
    dms, topic = "dms/crm/customer", "debezium/topics/crm.public.customer"
    return {
        f"{dms}/LOAD00000001.parquet": (dms, "dms", _dms_rows(other + keys, 0, None, tag), LOAD_SCHEMA, "snappy"),
        f"{dms}/2026/11/25/20261125-100000000.parquet": (
            dms,
            "dms",
            _dms_rows(mixed, 100, "U", tag),
            CDC_SCHEMA,
            "snappy",
        ),
        f"{dms}/2026/11/26/20261126-090000000.parquet": (
            dms,
            "dms",
            _dms_rows(mixed[::-1], 200, "U", tag),
            CDC_SCHEMA,
            "gzip",
        ),
        f"{dms}/2026/11/26/20261126-100000000.parquet": (
            dms,
            "dms",
            _dms_rows(other, 300, "I", tag),
            CDC_SCHEMA,
            "none",
        ),
        f"{topic}/partition=0/crm.public.customer+0+0000000000.snappy.parquet": (
            topic,
            "debezium_envelope",
            _envelope_rows([(None, keys[0]), (None, 3), (keys[0], keys[0]), (3, 3), (None, None)], 0, tag),
            ENVELOPE_SCHEMA,
            "snappy",
        ),
        f"{topic}/partition=0/crm.public.customer+0+0000000005.snappy.parquet": (
            topic,
            "debezium_envelope",
            _envelope_rows([(keys[-1], 9), (4, 4), (2, None), (keys[0], None)], 5, tag),
            ENVELOPE_SCHEMA,
            "zstd",
        ),
        f"{topic}/partition=1/crm.public.customer+1+0000000000.snappy.parquet": (
            topic,
            "debezium_envelope",
            _envelope_rows([(None, 1), (1, 2)], 0, tag),
            ENVELOPE_SCHEMA,
            "snappy",
        ),
    }


# What producers and tools leave beside raw files: not raw files, never rewritten.
BESIDE = {
    "dms/crm/customer/2026/11/27/20261127-080000000.parquet": b"",  # an upload in progress
    "dms/crm/customer/_SUCCESS": b"",
    "dms/crm/customer/notes.txt": b"not a raw file",
}
KEY_COLUMN = {"dms": "customer_id", "debezium_envelope": "id"}


def _key_values(row: dict, producer: str) -> set[str]:
    """The subject keys a row holds (top level for DMS; `before` and `after` for an envelope)."""
    if producer == "dms":
        return {str(row["CUSTOMER_ID"])}
    return {str(image["id"]) for image in (row["before"], row["after"]) if image}


@pytest.fixture(params=["local", "s3"])
def store(request, tmp_path) -> tuple[fs.FileSystem, str, str]:
    """(a pyarrow filesystem made apart from the seam, the root inside it, the root as a landing
    string): a fresh folder on this machine's disk, or a fresh prefix of the test server's bucket
    (the s3_server fixture is only started for the s3 case)."""
    if request.param == "local":
        return fs.LocalFileSystem(), str(tmp_path), str(tmp_path)
    server: Server = request.getfixturevalue("s3_server")
    variables = server.variables
    s3 = fs.S3FileSystem(
        endpoint_override=variables["AWS_ENDPOINT_URL_S3"],
        access_key=variables["AWS_ACCESS_KEY_ID"],
        secret_key=variables["AWS_SECRET_ACCESS_KEY"],
        region=variables["AWS_REGION"],
        force_virtual_addressing=False,
    )
    prefix = f"{server.bucket}/{uuid.uuid4().hex[:8]}/landing"
    return s3, prefix, f"s3a://{prefix}"


def _put(filesystem: fs.FileSystem, path: str, data: bytes) -> None:
    filesystem.create_dir(path.rsplit("/", 1)[0], recursive=True)
    with filesystem.open_output_stream(path) as out:
        out.write(data)


def _parquet(rows: list[dict], schema: pa.Schema, compression: str) -> bytes:
    buffer = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), buffer, compression=compression)
    return buffer.getvalue().to_pybytes()


def _write_tree(filesystem: fs.FileSystem, root: str, files: dict) -> dict[str, bytes]:
    """Every file of the tree and BESIDE under `root`; {relative path: bytes as written}."""
    written = {relative: _parquet(rows, schema, codec) for relative, (_, _, rows, schema, codec) in files.items()}
    written |= BESIDE
    for relative, data in written.items():
        _put(filesystem, f"{root}/{relative}", data)
    return written


def _everything(filesystem: fs.FileSystem, top: str) -> dict[str, bytes]:
    """{path: bytes} of every file under `top` (the whole bucket, on S3), read back with pyarrow."""
    found = {}
    for info in filesystem.get_file_info(fs.FileSelector(top, recursive=True)):
        if info.type == fs.FileType.File:
            with filesystem.open_input_stream(info.path) as stream:
                found[info.path] = stream.read()
    return found


def _values(value) -> list:
    """Every scalar of a row, struct fields included."""
    if isinstance(value, dict):
        return [v for item in value.values() for v in _values(item)]
    return [value]


def _holding(everything: dict[str, bytes], emails: set[str]) -> set[str]:
    """The Parquet files among `everything` with a row that holds an ERASED key or one of `emails`."""
    found = set()
    for path, data in everything.items():
        if not path.endswith(".parquet") or not data:
            continue
        producer = "debezium_envelope" if "/debezium/" in path else "dms"
        for row in pq.ParquetFile(pa.BufferReader(data)).read().to_pylist():
            if _key_values(row, producer) & set(ERASED) or set(_values(row)) & emails:
                found.add(path)
    return found


def _holders(landing: str, personal: tuple[tuple[str, str], ...] = ()) -> dict[str, Holder]:
    """The two raw holders as `holders()` makes them from the sources' meta (subjects.py)."""
    return {
        "dms/crm/customer": Holder(
            "crm.customer",
            "customer_id",
            folder=Location.parse(f"{landing}/dms/crm/customer"),
            producer="dms",
            personal=personal,
        ),
        "debezium/topics/crm.public.customer": Holder(
            "crm_cdc.customer",
            "id",
            folder=Location.parse(f"{landing}/debezium/topics/crm.public.customer"),
            producer="debezium_envelope",
            personal=personal,
        ),
    }


def test_erasure_rewrites_the_raw_objects_under_their_names_and_no_object_holds_the_subject_after(store):
    filesystem, root, landing = store
    top = root.split("/", 1)[0] if landing.startswith("s3a://") else root  # the whole bucket on S3
    files = _files("erase", [int(k) for k in ERASED])
    written = _write_tree(filesystem, root, files)
    subject_emails = {
        value
        for _, producer, rows, _, _ in files.values()
        for row in rows
        if _key_values(row, producer) & set(ERASED)
        for value in _values(row)
        if isinstance(value, str) and "@" in value
    }
    before = _everything(filesystem, top)
    holding = {
        f"{root}/{r}"
        for r, (_, producer, rows, _, _) in files.items()
        if any(_key_values(row, producer) & set(ERASED) for row in rows)
    }
    assert subject_emails and len(holding) >= 4 and _holding(before, subject_emails) == holding

    removed = {}
    for folder, holder in _holders(landing).items():
        listed = raw_folder_files(holder)
        assert sorted(f.relative for f in listed) == sorted(r[len(folder) + 1 :] for r in files if r.startswith(folder))
        for file in listed:
            removed[f"{folder}/{file.relative}"] = scrub_raw_file(file, holder.column, ERASED, holder.producer)

    after = _everything(filesystem, top)
    assert sorted(after) == sorted(before)  # same names: nothing staged beside, nothing deleted
    for relative, (_, producer, rows, schema, codec) in files.items():
        path = f"{root}/{relative}"
        kept = [row for row in rows if not _key_values(row, producer) & set(ERASED)]
        assert removed[relative] == len(rows) - len(kept)
        if len(kept) == len(rows):
            assert after[path] == written[relative], f"{relative}: rewritten though it held no row of the subject"
            continue
        new = pq.ParquetFile(pa.BufferReader(after[path]))
        assert new.read().to_pylist() == kept, f"{relative}: other rows changed"
        old = pq.ParquetFile(pa.BufferReader(written[relative]))
        assert new.schema.equals(old.schema) and new.schema_arrow == schema
        codecs = {new.metadata.row_group(0).column(i).compression for i in range(new.metadata.num_columns)}
        assert codecs == {"UNCOMPRESSED" if codec == "none" else codec.upper()}
    assert sum(removed.values()) > 0 and {r: after[f"{root}/{r}"] for r in BESIDE} == BESIDE

    assert _holding(after, subject_emails) == set()  # every object under the bucket, read back

    # again: nothing left to erase, nothing rewritten
    for holder in _holders(landing).values():
        assert sum(scrub_raw_file(f, holder.column, ERASED, holder.producer) for f in raw_folder_files(holder)) == 0
    assert _everything(filesystem, top) == after


def test_rectification_rewrites_the_raw_objects_under_their_names_with_the_correction_only(store):
    filesystem, root, landing = store
    files = _files("rectify", [int(RECTIFIED)])
    written = _write_tree(filesystem, root, files)
    new_email = "rectified-5@example.com"
    old_emails = set()
    for _, producer, rows, _, _ in files.values():
        for row in rows:
            for image in [row] if producer == "dms" else [i for i in (row["before"], row["after"]) if i]:
                key = image.get("CUSTOMER_ID", image.get("id"))
                if str(key) == RECTIFIED and image["email"] is not None:
                    old_emails.add(image["email"])
    assert len(old_emails) > 4

    # as rectify() does: scan every raw file for the old values, then rewrite those that hold one
    found_emails, changed = set(), {}
    for folder, holder in _holders(landing, (("email", "email"),)).items():
        for file in raw_folder_files(holder):
            values, types = raw_personal_values(file, holder.column, [RECTIFIED], holder.producer, ["email"])
            found_emails |= values.get(("email", RECTIFIED), set())
            if values:
                assert types == {"email": pa.string()}
                changed[f"{folder}/{file.relative}"] = rectify_raw_file(
                    file, holder.column, [RECTIFIED], holder.producer, {"email": new_email}
                )
    assert found_emails == old_emails

    after = _everything(filesystem, root)
    assert sorted(after) == sorted(f"{root}/{r}" for r in written)
    for relative, (_, producer, rows, _, _) in files.items():
        expected, count = [], 0
        for row in rows:
            row = {k: (dict(v) if isinstance(v, dict) else v) for k, v in row.items()}
            for image in [row] if producer == "dms" else [i for i in (row["before"], row["after"]) if i]:
                key = image.get("CUSTOMER_ID", image.get("id"))
                if str(key) == RECTIFIED and image["email"] is not None:
                    image["email"], count = new_email, count + 1
            expected.append(row)
        assert changed.get(relative, 0) == count
        new = pq.ParquetFile(pa.BufferReader(after[f"{root}/{relative}"]))
        assert new.read().to_pylist() == expected
        if not count:
            assert after[f"{root}/{relative}"] == written[relative]
        else:
            old = pq.ParquetFile(pa.BufferReader(written[relative]))
            assert new.schema.equals(old.schema)
            assert new.metadata.row_group(0).column(0).compression == old.metadata.row_group(0).column(0).compression
        table = new.read()
        assert not {v for row in table.to_pylist() for v in _values(row)} & old_emails


def test_a_raw_object_deleted_since_the_listing_is_skipped_not_recreated(store):
    filesystem, root, landing = store
    files = {r: f for r, f in _files("gone", [int(OTHER)]).items() if r.startswith("dms/")}
    _write_tree(filesystem, root, files)
    holder = _holders(landing)["dms/crm/customer"]
    listed = raw_folder_files(holder)
    gone = next(f for f in listed if f.name.startswith("LOAD"))
    filesystem.delete_file(f"{root}/dms/crm/customer/{gone.relative}")  # a lifecycle rule, say
    assert scrub_raw_file(gone, holder.column, [OTHER], holder.producer) == 0
    assert raw_personal_values(gone, holder.column, [OTHER], holder.producer, ["email"]) == ({}, {})
    assert filesystem.get_file_info(f"{root}/dms/crm/customer/{gone.relative}").type == fs.FileType.NotFound


@pytest.mark.parametrize("broken", ["secret", "endpoint"])
def test_a_refused_write_on_s3_is_one_line_and_leaves_the_object_as_it_was(s3_server: Server, monkeypatch, broken):
    s3 = fs.FileSystem.from_uri(f"s3://{s3_server.bucket}")[0]  # the standard variables, as the seam reads them
    key = f"{s3_server.bucket}/{uuid.uuid4().hex[:8]}/dms/crm/customer/20261125-100000000.parquet"
    rows = _dms_rows([1, int(OTHER), 2], 0, "U", "refused")
    _put(s3, key, _parquet(rows, CDC_SCHEMA, "snappy"))
    where = Location.parse(f"s3a://{key}")
    down = f"http://127.0.0.1:{free_port_block()}"
    if broken == "secret":
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret-value")
    else:
        monkeypatch.setenv("AWS_ENDPOINT_URL_S3", down)
    with pytest.raises(StorageError) as refused:
        where.write_bytes(_parquet(rows[:1], CDC_SCHEMA, "snappy"))
    said = str(refused.value)
    assert "\n" not in said and "not-the-secret-value" not in said
    if broken == "secret":
        assert said.startswith(f"S3 at {s3_server.endpoint} refused bucket {s3_server.bucket}")
        assert "AWS_SECRET_ACCESS_KEY" in said and "s3:PutObject" in said
        with pytest.raises(ErasureError, match=f"refused bucket {s3_server.bucket}"):
            scrub_raw_file(where, "customer_id", [OTHER], "dms")
    else:
        assert said.startswith(f"S3 at {down} does not answer (writing {where}): check AWS_ENDPOINT_URL_S3")
    monkeypatch.undo()
    with s3.open_input_stream(key) as stream:
        assert pq.ParquetFile(pa.BufferReader(stream.read())).read().to_pylist() == rows
