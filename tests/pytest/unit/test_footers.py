"""Union schemas from Parquet footers, and the footer cache: pyarrow only, no Spark."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import zlib
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fuzz.damage import BYTES, damage
from fuzz.python_side import SOURCES, assert_worded, damaged_file, sample_files
from python_hooks.evolution import footers
from python_hooks.evolution.footers import (
    FooterCache,
    FooterReadError,
    TypeConflict,
    UnionSchema,
    read_pages,
    read_union_schema,
)
from python_hooks.landing.files import raw_files
from python_hooks.personal_data import scrub_raw_file


def write(path: Path, schema: pa.Schema, rows: int = 2) -> Path:
    """A Parquet file with `schema` and `rows` rows of nulls (the footer is what matters)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.table({f.name: pa.nulls(rows, f.type) for f in schema}, schema=schema)
    pq.write_table(table, path)
    return path


@pytest.fixture
def dms_files(tmp_path: Path) -> list[Path]:
    folder = tmp_path / "crm" / "customer"
    return [
        write(
            folder / "LOAD00000001.parquet",
            pa.schema([("id", pa.int32()), ("name", pa.string()), ("last_update_time", pa.timestamp("us"))]),
        ),
        write(
            folder / "20261121-104512345.parquet",
            pa.schema(
                [
                    ("Op", pa.string()),
                    ("ID", pa.int64()),
                    ("name", pa.string()),
                    ("last_update_time", pa.timestamp("us")),
                    ("COUNTRY", pa.string()),
                ]
            ),
        ),
        write(
            folder / "20261121-114512345.parquet",
            pa.schema([("Op", pa.string()), ("id", pa.int32()), ("country", pa.string()), ("tier", pa.int16())]),
        ),
    ]


@pytest.fixture
def counted_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every footer read, by file name (pyarrow.parquet.read_schema is what the module calls)."""
    reads: list[str] = []
    real = pq.read_schema

    def counting(where, *args, **kwargs):
        reads.append(Path(where).name)
        return real(where, *args, **kwargs)

    monkeypatch.setattr(pq, "read_schema", counting)
    return reads


EXPECTED_DMS_UNION = pa.schema(
    [
        ("id", pa.int64()),
        ("name", pa.string()),
        ("last_update_time", pa.timestamp("us")),
        ("Op", pa.string()),
        ("COUNTRY", pa.string()),
        ("tier", pa.int16()),
    ]
)


# -------------------------------------------------------------------------------- read_union_schema


def test_union_of_differing_files(dms_files: list[Path]) -> None:
    union = read_union_schema(dms_files)
    assert union == UnionSchema(EXPECTED_DMS_UNION, ())


def test_union_reads_only_footers(dms_files: list[Path], monkeypatch: pytest.MonkeyPatch) -> None:
    def no_data(*args, **kwargs):
        raise AssertionError("read the data, not only the footer")

    monkeypatch.setattr(pq, "read_table", no_data)
    monkeypatch.setattr(pq.ParquetFile, "read", no_data)
    assert read_union_schema(dms_files).schema == EXPECTED_DMS_UNION


def test_union_keeps_the_wider_type_in_either_order(tmp_path: Path) -> None:
    wide = write(tmp_path / "a.parquet", pa.schema([("amount", pa.decimal128(12, 2)), ("score", pa.float64())]))
    narrow = write(tmp_path / "b.parquet", pa.schema([("AMOUNT", pa.decimal128(10, 2)), ("score", pa.float32())]))
    expected = pa.schema([("amount", pa.decimal128(12, 2)), ("score", pa.float64())])
    assert read_union_schema([wide, narrow]) == UnionSchema(expected, ())
    assert read_union_schema([narrow, wide]) == UnionSchema(
        pa.schema([("AMOUNT", pa.decimal128(12, 2)), ("score", pa.float64())]), ()
    )


def test_union_fills_in_null_typed_columns(tmp_path: Path) -> None:
    first = write(tmp_path / "a.parquet", pa.schema([("id", pa.int64()), ("nickname", pa.null())]))
    second = write(tmp_path / "b.parquet", pa.schema([("id", pa.int64()), ("NICKNAME", pa.string())]))
    third = write(tmp_path / "c.parquet", pa.schema([("id", pa.int64()), ("nickname", pa.null())]))
    union = read_union_schema([first, second, third])
    assert union == UnionSchema(pa.schema([("id", pa.int64()), ("nickname", pa.string())]), ())


def test_union_records_a_conflict_naming_the_file(tmp_path: Path) -> None:
    first = write(tmp_path / "a.parquet", pa.schema([("id", pa.int64()), ("zip", pa.int32())]))
    second = write(tmp_path / "b.parquet", pa.schema([("id", pa.int64()), ("ZIP", pa.string()), ("x", pa.bool_())]))
    third = write(tmp_path / "c.parquet", pa.schema([("price", pa.decimal128(10, 2))]))
    fourth = write(tmp_path / "d.parquet", pa.schema([("price", pa.decimal128(10, 3))]))
    union = read_union_schema([first, second, third, fourth])
    assert union.schema == pa.schema(
        [("id", pa.int64()), ("zip", pa.int32()), ("x", pa.bool_()), ("price", pa.decimal128(10, 2))]
    )
    assert union.conflicts == (
        TypeConflict("zip", str(second), "int", "string"),
        TypeConflict("price", str(fourth), "decimal(10,2)", "decimal(10,3)"),
    )
    message = union.conflicts[0].message()
    assert str(second) in message and "'zip'" in message and "int" in message and "string" in message


def test_union_merges_debezium_envelope_images(tmp_path: Path) -> None:
    def envelope(image: pa.StructType) -> pa.Schema:
        return pa.schema([("before", image), ("after", image), ("op", pa.string()), ("ts_ms", pa.int64())])

    old = pa.struct([("id", pa.int32()), ("name", pa.string())])
    new = pa.struct([("id", pa.int64()), ("name", pa.string()), ("country", pa.string())])
    bad = pa.struct([("id", pa.string())])
    files = [
        write(tmp_path / "t+0+0000000000.snappy.parquet", envelope(old)),
        write(tmp_path / "t+0+0000000100.snappy.parquet", envelope(new)),
        write(tmp_path / "t+0+0000000200.snappy.parquet", envelope(bad)),
    ]
    union = read_union_schema(files)
    merged = pa.struct([("id", pa.int64()), ("name", pa.string()), ("country", pa.string())])
    assert union.schema == envelope(merged)
    assert union.conflicts == (
        TypeConflict("before.id", str(files[2]), "bigint", "string"),
        TypeConflict("after.id", str(files[2]), "bigint", "string"),
    )


def test_union_of_no_files_is_empty() -> None:
    assert read_union_schema([]) == UnionSchema(pa.schema([]), ())


@pytest.mark.parametrize(
    "content",
    [b"", b"not parquet at all", b"PAR1" + b"\x00" * 20 + b"PAR1"],
    ids=["empty", "text", "bad-footer"],
)
def test_unreadable_file_raises_naming_it(tmp_path: Path, dms_files: list[Path], content: bytes) -> None:
    broken = tmp_path / "crm" / "customer" / "20261121-124512345.parquet"
    broken.write_bytes(content)
    with pytest.raises(FooterReadError) as error:
        read_union_schema([*dms_files, broken])
    assert str(broken) in str(error.value)


def test_columns_that_differ_only_in_case_in_one_file_are_refused(tmp_path: Path) -> None:
    twice = tmp_path / "20261121-124512345.parquet"
    pq.write_table(pa.table({"id": [1], "country": ["FR"], "COUNTRY": ["DE"]}), twice)
    with pytest.raises(FooterReadError) as error:
        read_union_schema([twice])
    assert str(twice) in str(error.value) and "'country' and 'COUNTRY'" in str(error.value)


def test_missing_file_raises_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "gone.parquet"
    with pytest.raises(FooterReadError, match="gone.parquet"):
        read_union_schema([missing])
    with pytest.raises(FooterReadError, match="gone.parquet"):
        FooterCache(tmp_path / "state.json").union_schema("t", [missing])


# ------------------------------------------------------------------------------------- FooterCache


def test_cache_reads_only_new_files(tmp_path: Path, dms_files: list[Path], counted_reads: list[str]) -> None:
    cache = FooterCache(tmp_path / "state" / "footers.json")
    first = cache.union_schema("crm.customer", dms_files[:2])
    assert counted_reads == ["LOAD00000001.parquet", "20261121-104512345.parquet"]
    assert first.schema == pa.schema(list(EXPECTED_DMS_UNION)[:5])

    counted_reads.clear()
    second = cache.union_schema("crm.customer", dms_files)
    assert counted_reads == ["20261121-114512345.parquet"]
    assert second == UnionSchema(EXPECTED_DMS_UNION, ())

    counted_reads.clear()
    assert cache.union_schema("crm.customer", dms_files) == UnionSchema(EXPECTED_DMS_UNION, ())
    assert counted_reads == []


def test_cache_persists_across_instances(tmp_path: Path, dms_files: list[Path], counted_reads: list[str]) -> None:
    state = tmp_path / "footers.json"
    cache = FooterCache(state)
    cache.union_schema("crm.customer", dms_files)
    cache.save()
    entries = json.loads(state.read_text())["tables"]["crm.customer"]
    assert {name: entry[:2] for name, entry in entries.items()} == {
        str(p): [p.stat().st_size, p.stat().st_mtime_ns] for p in dms_files
    }
    assert not [p for p in state.parent.iterdir() if p.name.startswith(".footers.json.")]  # no temp file left

    counted_reads.clear()
    again = FooterCache(state).union_schema("crm.customer", dms_files)
    assert counted_reads == []
    assert again == UnionSchema(EXPECTED_DMS_UNION, ())


def test_the_state_keeps_each_schema_once(tmp_path: Path, counted_reads: list[str]) -> None:
    """A table's files nearly always share their schema: the state names it by index, so it grows by a few numbers
    per file (the soak's day: 22.5 MB of schemas for 27,055 files before, 3.3 MB after), and each entry read back
    has its file's own schema."""
    narrow, wide = pa.schema([("id", pa.int64())]), pa.schema([("id", pa.int64()), ("name", pa.string())])
    files = [write(tmp_path / "t" / f"{n:02d}.parquet", wide if n % 3 == 0 else narrow) for n in range(9)]
    other = [write(tmp_path / "u" / f"{n:02d}.parquet", narrow) for n in range(2)]
    state = tmp_path / "footers.json"
    cache = FooterCache(state)
    cache.footers("t", files)
    cache.footers("u", other)
    cache.save()
    saved = json.loads(state.read_text())
    assert len(saved["schemas"]) == 2
    schema_of = {
        name: footers._schema_from_text(saved["schemas"][entry[2]]) for name, entry in saved["tables"]["t"].items()
    }
    assert schema_of == {str(f): wide if n % 3 == 0 else narrow for n, f in enumerate(files)}

    counted_reads.clear()
    again = FooterCache(state)
    assert again.footers("t", files) == [(str(f), wide if n % 3 == 0 else narrow) for n, f in enumerate(files)]
    assert again.footers("u", other) == [(str(f), narrow) for f in other]
    assert counted_reads == []


def test_a_state_of_version_2_is_read(tmp_path: Path, dms_files: list[Path], counted_reads: list[str]) -> None:
    """The state of the release before (a schema written out per entry) holds after an upgrade: no footer read again."""
    state = tmp_path / "footers.json"
    cache = FooterCache(state)
    expected = cache.union_schema("crm.customer", dms_files)
    version_2 = {
        "version": 2,
        "tables": {
            table: {name: [e.size, e.mtime_ns, footers._schema_to_text(e.schema)] for name, e in files.items()}
            for table, files in cache._tables.items()
        },
    }
    state.write_text(json.dumps(version_2))
    counted_reads.clear()
    assert FooterCache(state).union_schema("crm.customer", dms_files) == expected
    assert counted_reads == []


def test_a_listed_file_is_the_same_cache_entry_as_its_path(
    tmp_path: Path, dms_files: list[Path], counted_reads: list[str]
) -> None:
    """A cache written from paths (before the storage seam) holds for the files a listing gives:
    same key (the path), same size and mtime, so no footer is read again."""
    state = tmp_path / "footers.json"
    cache = FooterCache(state)
    cache.union_schema("crm.customer", dms_files)
    cache.save()
    counted_reads.clear()
    listed = raw_files(dms_files[0].parent, "dms")
    assert [str(file) for file in listed] == [str(path) for path in dms_files]
    assert FooterCache(state).union_schema("crm.customer", listed) == UnionSchema(EXPECTED_DMS_UNION, ())
    assert counted_reads == []


def test_cache_keeps_tables_apart(tmp_path: Path, dms_files: list[Path], counted_reads: list[str]) -> None:
    other = write(tmp_path / "crm" / "order" / "LOAD00000001.parquet", pa.schema([("order_id", pa.int64())]))
    cache = FooterCache(tmp_path / "footers.json")
    cache.union_schema("crm.customer", dms_files)
    assert cache.union_schema("crm.order", [other]).schema == pa.schema([("order_id", pa.int64())])
    counted_reads.clear()
    assert cache.union_schema("crm.customer", dms_files).schema == EXPECTED_DMS_UNION
    assert counted_reads == []


def test_cache_round_trips_types_exactly(tmp_path: Path, counted_reads: list[str]) -> None:
    schema = pa.schema(
        [
            pa.field("amount", pa.decimal128(18, 4), metadata={b"comment": b"source precision"}),
            ("big", pa.decimal256(50, 12)),
            ("at_us", pa.timestamp("us")),
            ("at_ms_utc", pa.timestamp("ms", tz="UTC")),
            ("day", pa.date32()),
            ("flag", pa.bool_()),
            ("blob", pa.binary()),
            ("uuid", pa.binary(16)),
            ("u64", pa.uint64()),
            ("tags", pa.list_(pa.string())),
            ("attrs", pa.map_(pa.string(), pa.list_(pa.decimal128(9, 3)))),
            ("address", pa.struct([("zip code", pa.int32()), ("geo", pa.struct([("lat", pa.float64())]))])),
            ("nothing", pa.null()),
        ]
    )
    file = write(tmp_path / "a.parquet", schema)
    state = tmp_path / "footers.json"
    cache = FooterCache(state)
    fresh = cache.union_schema("t", [file])
    cache.save()
    counted_reads.clear()
    cached = FooterCache(state).union_schema("t", [file])
    assert counted_reads == []
    # Equal types, nested field names and nullability (Arrow IPC does not keep the name of a map's
    # entries struct, which the Parquet reader sets to the column name: it is no part of the type).
    assert cached.schema == fresh.schema
    assert [str(f.type) for f in cached.schema] == [str(f.type).replace(" ('attrs')", "") for f in fresh.schema]
    assert cached.schema.field("amount").type == pa.decimal128(18, 4)
    assert cached.schema.field("amount").metadata == {b"comment": b"source precision"}
    assert cached.schema.field("address").type.field("zip code").type == pa.int32()
    assert cached.schema.field("at_ms_utc").type == pa.timestamp("ms", tz="UTC")


def test_cache_rereads_changed_files_and_forgets_removed_ones(
    tmp_path: Path, dms_files: list[Path], counted_reads: list[str]
) -> None:
    cache = FooterCache(tmp_path / "footers.json")
    cache.union_schema("crm.customer", dms_files)
    # Rewrite the last file: 'tier' gone, 'segment' new; keep a distinct mtime even on coarse clocks.
    rewritten = write(
        dms_files[2], pa.schema([("Op", pa.string()), ("id", pa.int32()), ("segment", pa.string())]), rows=5
    )
    stat = rewritten.stat()
    os.utime(rewritten, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    counted_reads.clear()
    union = cache.union_schema("crm.customer", dms_files[1:])
    assert counted_reads == ["20261121-114512345.parquet"]
    # The union of the files listed now: the removed LOAD file's and the replaced file's old columns
    # that no listed file holds are gone (the table keeps what it was given; the cache keeps nothing).
    assert union == read_union_schema(dms_files[1:])
    assert union.schema == pa.schema(
        [
            ("Op", pa.string()),
            ("ID", pa.int64()),
            ("name", pa.string()),
            ("last_update_time", pa.timestamp("us")),
            ("COUNTRY", pa.string()),
            ("segment", pa.string()),
        ]
    )
    cache.save()
    assert set(json.loads((tmp_path / "footers.json").read_text())["tables"]["crm.customer"]) == {
        str(p) for p in dms_files[1:]
    }


def test_a_removed_then_same_named_file_brings_back_none_of_its_columns(
    tmp_path: Path, dms_files: list[Path], counted_reads: list[str]
) -> None:
    """Issue 43's sequence on the cache alone: a file of another table lands (read), is removed (the
    folder listed without it, or the table not looked at), and a new file gets its name: the union is
    the listed files', never the removed file's columns, whatever the cache saw in between."""
    state = tmp_path / "footers.json"
    stranger = write(
        dms_files[0].parent / "20261121-124512345.parquet",
        pa.schema([("Op", pa.string()), ("order_id", pa.int64()), ("amount", pa.decimal128(10, 2))]),
    )
    cache = FooterCache(state)
    assert "amount" in cache.union_schema("crm.customer", [*dms_files, stranger]).schema.names
    cache.save()
    stranger.unlink()
    # The next run does not look at the table (nothing new): the state keeps the stranger's entry.
    same_name = write(stranger, pa.schema([("Op", pa.string()), ("id", pa.int32()), ("tier", pa.int16())]), rows=3)
    stat = same_name.stat()
    os.utime(same_name, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    counted_reads.clear()
    union = FooterCache(state).union_schema("crm.customer", [*dms_files, same_name])
    assert counted_reads == [same_name.name]
    assert union == UnionSchema(EXPECTED_DMS_UNION, ())
    assert union == read_union_schema([*dms_files, same_name])


def test_refused_files_are_left_out_of_the_union(tmp_path: Path, dms_files: list[Path]) -> None:
    stranger = write(dms_files[0].parent / "20261121-124512345.parquet", pa.schema([("order_id", pa.int64())]))
    cache = FooterCache(tmp_path / "footers.json")
    listed = [*dms_files, stranger]
    assert cache.union_schema("crm.customer", listed, refused={str(stranger)}) == UnionSchema(EXPECTED_DMS_UNION, ())
    assert cache.union_schema("crm.customer", listed).schema.names == [*EXPECTED_DMS_UNION.names, "order_id"]
    # the refused file's types are still known (its refusal names it)
    assert cache.file_types("crm.customer")[str(stranger)] == {"order_id": "bigint"}


@pytest.mark.parametrize("order", ["forwards", "backwards"])
def test_the_cache_gives_the_answer_of_a_fresh_read(tmp_path: Path, dms_files: list[Path], order: str) -> None:
    """Whatever the cache saw before (any subset, any order), the union of a listing is that of reading
    the listed footers afresh: the cache can always be thrown away."""
    cache = FooterCache(tmp_path / "footers.json")
    subsets = [dms_files[i:j] for i in range(3) for j in range(i + 1, 4)]
    for subset in subsets if order == "forwards" else subsets[::-1]:
        assert cache.union_schema("crm.customer", subset) == read_union_schema(subset)
        cache.save()
        cache = FooterCache(tmp_path / "footers.json")


def test_cache_remembers_conflicts(tmp_path: Path, counted_reads: list[str]) -> None:
    good = write(tmp_path / "a.parquet", pa.schema([("zip", pa.int32())]))
    bad = write(tmp_path / "b.parquet", pa.schema([("zip", pa.string())]))
    state = tmp_path / "footers.json"
    cache = FooterCache(state)
    expected = UnionSchema(pa.schema([("zip", pa.int32())]), (TypeConflict("zip", str(bad), "int", "string"),))
    assert cache.union_schema("t", [good, bad]) == expected
    cache.save()
    counted_reads.clear()
    reloaded = FooterCache(state)
    assert reloaded.union_schema("t", [good, bad]) == expected  # not read again, still reported
    assert counted_reads == []
    # The bad file removed from the raw folder: its conflict goes with it.
    assert reloaded.union_schema("t", [good]) == UnionSchema(pa.schema([("zip", pa.int32())]), ())


def test_failed_read_leaves_the_cache_unchanged(tmp_path: Path, dms_files: list[Path]) -> None:
    cache = FooterCache(tmp_path / "footers.json")
    cache.union_schema("crm.customer", dms_files[:1])
    broken = dms_files[0].parent / "20261121-999999999.parquet"
    broken.write_bytes(b"garbage")
    with pytest.raises(FooterReadError, match="20261121-999999999"):
        cache.union_schema("crm.customer", [*dms_files, broken])
    cache.save()
    assert list(json.loads((tmp_path / "footers.json").read_text())["tables"]["crm.customer"]) == [str(dms_files[0])]


@pytest.mark.parametrize(
    "content",
    [
        "{not json",
        "[]",
        '{"crm.customer": {"files": {}, "columns": []}}',
        '{"version": 2, "tables": {"crm.customer": {"x": [1]}}}',
        '{"version": 2, "tables": {"crm.customer": {"x": [1, 2, "not base64!"]}}}',
        '{"version": 2, "tables": {"crm.customer": {"x": [1, 2, "AAAA"]}}}',
    ],
    ids=["syntax", "list", "version-1", "bad-entry", "bad-base64", "bad-ipc"],
)
def test_corrupt_state_starts_over(
    tmp_path: Path,
    dms_files: list[Path],
    counted_reads: list[str],
    caplog: pytest.LogCaptureFixture,
    content: str,
) -> None:
    state = tmp_path / "footers.json"
    state.write_text(content)
    with caplog.at_level(logging.WARNING, logger=footers.__name__):
        cache = FooterCache(state)
    assert any(str(state) in r.getMessage() and r.levelno == logging.WARNING for r in caplog.records)
    assert cache.union_schema("crm.customer", dms_files) == UnionSchema(EXPECTED_DMS_UNION, ())
    assert len(counted_reads) == 3
    cache.save()
    assert FooterCache(state).union_schema("crm.customer", dms_files).schema == EXPECTED_DMS_UNION


def test_a_state_entry_whose_signature_differs_is_read_again(
    tmp_path: Path, dms_files: list[Path], counted_reads: list[str]
) -> None:
    """An entry whose size or mtime is not the file's is read again, whatever schema it holds."""
    state = tmp_path / "footers.json"
    cache = FooterCache(state)
    cache.union_schema("crm.customer", dms_files)
    cache.save()
    data = json.loads(state.read_text())
    entries = data["tables"]["crm.customer"]
    stale = entries[str(dms_files[0])]
    stale[1] -= 1  # another mtime than the file's
    stale[2] = entries[str(dms_files[2])][2]  # and another file's schema
    state.write_text(json.dumps(data))
    counted_reads.clear()
    assert FooterCache(state).union_schema("crm.customer", dms_files) == UnionSchema(EXPECTED_DMS_UNION, ())
    assert counted_reads == [dms_files[0].name]


# ------------------------------------------------------------------------------------- read_pages


def _chunks_named_as_the_schema(path: Path) -> None:
    metadata = pq.read_metadata(path)
    schema = [tuple(metadata.schema.column(i).path.split(".")) for i in range(metadata.num_columns)]
    for group in range(metadata.num_row_groups):
        named = [tuple(metadata.row_group(group).column(i).path_in_schema.split(".")) for i in range(len(schema))]
        assert named == schema, f"row group {group}: {named} != {schema}"


def test_a_footer_whose_row_group_renames_a_column_is_refused_naming_file_and_column(tmp_path: Path) -> None:
    """A footer byte flipped inside a row group's own name for a column (found by the fuzz corpus: dms
    flip_footer seed 4): pyarrow reads the file by position, Spark's reader fails on the name, naming no file."""
    good = tmp_path / "20261121-124512345.parquet"
    pq.write_table(pa.table({"customer_id": [1, 2], "row_audit_ts": ["a", "b"]}), good)
    data = good.read_bytes()
    footer = len(data) - 8 - int.from_bytes(data[-8:-4], "little")
    chunk_name = data.index(b"row_audit_ts", data.index(b"row_audit_ts", footer) + 1)  # the schema's, then the chunk's
    bad = tmp_path / "20261121-124512346.parquet"
    bad.write_bytes(data[: chunk_name + 9] + b"\xdf" + data[chunk_name + 10 :])
    assert pq.read_table(bad).num_rows == 2  # pyarrow reads it all the same
    with pytest.raises(FooterReadError) as error:
        read_pages(bad)
    line = str(error.value)
    assert str(bad) in line and "'row_audit_ts'" in line and "column 2" in line and "damaged" in line, line
    read_pages(good)


@pytest.mark.parametrize("source", ["dms_customer_address", "debezium_flattened"])
@pytest.mark.parametrize("kind", sorted(BYTES))
def test_read_pages_refuses_in_words_exactly_what_pyarrow_cannot_read(tmp_path: Path, source: str, kind: str) -> None:
    """Damaged bytes (the fuzz library's kinds, ten seeds each): `read_pages` refuses a file exactly when
    pyarrow cannot read it whole (a damaged page pyarrow's batch iterator would pass over in silence
    included) or what it reads is not valid (text that is not UTF-8), or a row group names a column otherwise
    than the schema (pyarrow reads chunks by position, Spark by that name), in one line naming the file and
    saying what is wrong in words."""
    name = Path(damaged_file(source)).name
    good = sample_files()[source][3][damaged_file(source)]
    for seed in range(10):
        path = tmp_path / f"{seed}-{name}"
        path.write_bytes(damage(good, name, kind, seed, SOURCES[source].keys).files[name])
        try:
            pq.read_table(path).validate(full=True)
            _chunks_named_as_the_schema(path)
        except Exception:  # noqa: BLE001 - any failure: pyarrow cannot read it
            readable = False
        else:
            readable = True
        if readable:
            read_pages(path)
            continue
        with pytest.raises(FooterReadError) as error:
            read_pages(path)
        line = str(error.value)
        assert_worded(line, str(path), str(path), f"{kind} seed {seed}")
        assert "footer" in line or "pages do not decode" in line or "not UTF-8" in line, line


def _hadoop_crc(data: bytes, chunk: int = 512) -> bytes:
    """A checksum file as Hadoop's local file system writes it beside a file (checked against the .crc files Spark
    leaves in a warehouse): `crc\\0`, the chunk size, then the CRC32 of each chunk, all big-endian."""
    sums = b"".join(zlib.crc32(data[i : i + chunk]).to_bytes(4, "big") for i in range(0, len(data), chunk))
    return b"crc\0" + chunk.to_bytes(4, "big") + sums


@pytest.mark.parametrize("seed", range(5))
def test_a_damaged_or_stale_crc_beside_a_good_file_is_refused_in_words(tmp_path: Path, seed: int) -> None:
    """Hadoop's local file system checks a `.<name>.crc` beside a file when Spark reads it, and fails naming no
    table (found by `make fuzz`'s run sequences: a damaged .crc beside a LOAD file failed the staging view, and
    the batch log had no row). `read_pages` checks it as Hadoop does: a matching one, or one without Hadoop's
    header (which Hadoop ignores), passes; a damaged or stale one is refused naming the file and the .crc."""
    name = Path(damaged_file("dms_customer_address")).name
    good = sample_files()["dms_customer_address"][3][damaged_file("dms_customer_address")]
    path = tmp_path / name
    crc = tmp_path / f".{name}.crc"
    path.write_bytes(good)
    read_pages(path)  # no .crc
    for fine in (_hadoop_crc(good), _hadoop_crc(good, 100), b"not a Hadoop checksum", b"crc\0"):
        crc.write_bytes(fine)
        read_pages(path)
    for bad in (
        damage(good, name, "damaged_crc", seed).files[crc.name],  # the fuzz library's: header, then garbage
        _hadoop_crc(good)[:-4],  # stale: a file that grew since
        _hadoop_crc(good[:-1] + bytes([good[-1] ^ 1])),  # the file changed since (its last byte)
    ):
        crc.write_bytes(bad)
        with pytest.raises(FooterReadError) as error:
            read_pages(path)
        line = str(error.value)
        assert_worded(line, str(path), str(path), f"damaged_crc seed {seed}")
        assert crc.name in line and "does not match" in line, line


def test_read_pages_of_a_file_gone_since_it_was_listed(tmp_path: Path, dms_files: list[Path]) -> None:
    listed = raw_files(dms_files[0].parent, "dms")
    dms_files[1].unlink()
    with pytest.raises(FooterReadError) as error:
        read_pages(listed[1])
    assert str(error.value) == (
        f"cannot read the Parquet footer of {dms_files[1]}: {dms_files[1]} was listed, then gone when read: deleted"
        " meanwhile (a lifecycle rule, or its producer); nothing read from it was applied"
    )


def test_read_pages_of_a_file_this_user_may_not_read(tmp_path: Path, dms_files: list[Path]) -> None:
    """A file of mode 000, read by a process that permissions bind (root without its override capabilities)."""
    dms_files[0].chmod(0)
    code = (
        "import sys\nfrom python_hooks.evolution.footers import FooterReadError, read_pages\n"
        "try:\n    read_pages(sys.argv[1])\nexcept FooterReadError as error:\n    print(error)\n"
    )
    command = [sys.executable, "-c", code, str(dms_files[0])]
    if os.geteuid() == 0:
        command = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--", *command]
    said = subprocess.run(command, capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    assert said == (
        f"cannot read the Parquet footer of {dms_files[0]}: permission denied: the user running the pipeline"
        f" (uid {os.geteuid()}) cannot read it; make it readable by that user (chmod, chown), then run again"
    )


def test_an_applied_file_changed_in_place_is_left_out_with_why(tmp_path: Path, dms_files: list[Path]) -> None:
    """`FooterCache.read`: a file the ledger lists is never a FooterReadError; replaced (size or mtime differ
    from its footer read before) or unreadable, it is in `changed` with why, and in no schema; a new file
    that cannot be read is still a FooterReadError."""
    state = tmp_path / "footers.json"
    cache = FooterCache(state)
    first = cache.read("crm.customer", dms_files, applied={dms_files[1].name})
    assert (first.schemas, first.changed) == (cache.footers("crm.customer", dms_files), {})
    cache.save()

    replaced, damaged = dms_files[1], dms_files[2]
    write(replaced, pa.schema([("Op", pa.string()), ("ID", pa.int64()), ("tier", pa.string())]), rows=3)
    os.utime(replaced, ns=(1_700_000_000_000_000_000, 1_700_000_000_000_000_000))
    damaged.write_bytes(damaged.read_bytes()[:-20])
    names = {replaced.name, damaged.name}
    found = FooterCache(state).read("crm.customer", dms_files, applied=names)
    assert [name for name, _ in found.schemas] == [str(dms_files[0])]
    assert sorted(found.changed) == sorted(str(p) for p in (replaced, damaged))
    assert "modified 2023-11-14 22:13:20 UTC now" in found.changed[str(replaced)], found.changed
    assert "Parquet's marker 'PAR1'" in found.changed[str(damaged)], found.changed

    again = FooterCache(state)  # the replaced file's entry is the applied copy's: the change is seen again
    again.read("crm.customer", dms_files, applied=names)
    again.save()
    assert str(replaced) in FooterCache(state).read("crm.customer", dms_files, applied=names).changed
    with pytest.raises(FooterReadError, match=damaged.name):  # not applied: refused in words as before
        FooterCache(state).read("crm.customer", dms_files, applied={replaced.name})


def test_files_rewritten_on_purpose_are_not_changed_in_place(tmp_path: Path, dms_files: list[Path]) -> None:
    """An erasure or a rectification rewrites applied raw files under their names, with their footers
    (personal_data/raw_files.py): once the cache is told (`note_rewritten`), the next run does not take them for
    applied files changed in place; a file told of whose footer changed still is one, and so is any other."""
    scrubbed, reshaped, other = dms_files
    schema = pq.read_schema(scrubbed).remove_metadata()
    pq.write_table(
        pa.table({"id": [1, 2], "name": ["a", "b"], "last_update_time": [None, None]}, schema=schema), scrubbed
    )
    state = tmp_path / footers.FOOTER_CACHE  # the cache of the hooks' state folder `tmp_path`
    cache = FooterCache(state)
    names = {path.name for path in dms_files}
    cache.read("crm.customer", dms_files, applied=names)
    cache.save()

    assert scrub_raw_file(scrubbed, "id", ["1"], "dms") == 1  # an erasure's rewrite
    write(reshaped, pa.schema([("Op", pa.string()), ("ID", pa.int64()), ("tier", pa.string())]), rows=3)
    write(other, pq.read_schema(other).remove_metadata(), rows=5)
    for path in dms_files:
        os.utime(path, ns=(1_700_000_000_000_000_000, 1_700_000_000_000_000_000))
    footers.note_rewritten(tmp_path / "elsewhere", [])  # nothing to tell: no state written
    assert not (tmp_path / "elsewhere").exists()
    footers.note_rewritten(tmp_path, [scrubbed, reshaped, tmp_path / "gone.parquet"])
    found = FooterCache(state).read("crm.customer", dms_files, applied=names)
    assert sorted(found.changed) == sorted([str(reshaped), str(other)]), found.changed
    assert [name for name, _ in found.schemas] == [str(scrubbed)]


def _not_utf8_text(values: list[bytes]) -> pa.Array:
    """A string array whose bytes are taken as they are (pyarrow's constructors would check them)."""
    offsets = [0]
    for value in values:
        offsets.append(offsets[-1] + len(value))
    return pa.Array.from_buffers(
        pa.string(),
        len(values),
        [None, pa.py_buffer(pa.array(offsets, pa.int32()).buffers()[1]), pa.py_buffer(b"".join(values))],
    )


def test_text_that_is_not_utf8_is_refused_naming_its_column(tmp_path: Path) -> None:
    """A page whose text bytes are not UTF-8 decodes in pyarrow without a word, and Spark would store the bytes
    (found by `make fuzz`'s run sequences: a flipped dictionary page was applied, and its rows could not be read
    back as text). `read_pages` refuses it naming the file and the column, at the top level and inside a struct."""
    bad = _not_utf8_text([b"Lyon", b"ab\x96c"])
    for name, table in (
        ("top.parquet", pa.table({"customer_id": [1, 2], "city": bad})),
        ("nested.parquet", pa.table({"customer_id": [1, 2], "address": pa.StructArray.from_arrays([bad], ["city"])})),
    ):
        path = tmp_path / name
        pq.write_table(table, path)
        with pytest.raises(FooterReadError) as error:
            read_pages(path)
        line = str(error.value)
        column = "city" if name == "top.parquet" else "address"
        assert str(path) in line and f"text column '{column}'" in line and "not UTF-8" in line, line
    good = tmp_path / "good.parquet"
    pq.write_table(pa.table({"customer_id": [1, 2], "city": ["Lyon", "Zürich"]}), good)
    read_pages(good)


@pytest.mark.parametrize("kind", ["flip_dictionary_page", "flip_data_page"])
def test_a_flipped_page_is_refused_or_reads_back_as_text(tmp_path: Path, kind: str) -> None:
    """Whatever a flipped page leaves, `read_pages` refuses the file, or every value reads back (text as text)."""
    for source in ("dms_customer_address", "debezium_flattened"):
        name = Path(damaged_file(source)).name
        good = sample_files()[source][3][damaged_file(source)]
        for seed in range(30):
            path = tmp_path / f"{source}-{seed}-{name}"
            path.write_bytes(damage(good, name, kind, seed).files[name])
            try:
                read_pages(path)
            except FooterReadError:
                continue
            pq.read_table(path).to_pylist()  # raises UnicodeDecodeError for text that is not UTF-8


def test_struct_fields_name_each_struct_column_s_fields_as_the_file_has_them(tmp_path: Path) -> None:
    """What the run's plan hands a Debezium envelope's batch instead of three `describe query ... .*`
    (commands/run.py, macros/cdc/staging_debezium.sql): read from a file's footer as written."""
    from sample_data import debezium

    path = tmp_path / "envelope.parquet"
    pq.write_table(debezium.PRODUCT_SCHEMA.empty_table(), path)
    fields = footers.struct_fields(footers.read_footer(path))
    assert set(fields) == {"before", "after", "source", "transaction"}
    assert fields["after"] == fields["before"] == [f.name for f in debezium.PRODUCT_ROW]
    assert fields["source"] == [f.name for f in debezium.PG_SOURCE]
    mixed = pa.schema([pa.field("Id", pa.int64()), pa.field("Payload", pa.struct([pa.field("Zeta", pa.int32())]))])
    assert footers.struct_fields(mixed) == {"payload": ["Zeta"]}  # the column by its name in lower case
