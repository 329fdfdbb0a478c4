"""Damage done to a valid raw Parquet file the ways storage and producers do it: pure Python and pyarrow.

`damage(good, name, kind, seed)` gives, from a good file's bytes, the files to land in its place (its
name, and for `sidecars` the files a Hadoop-style writer leaves beside it), deterministic for a seed, with
a description in words. `structure(data)` finds a file's structural boundaries (the leading magic, each
column chunk and its dictionary page, the footer, the footer length, the trailing magic), where the byte
kinds flip and cut.

Kinds (KINDS): bytes damaged by storage (flips in data and dictionary pages, zeroed runs, cuts at every
boundary, an edited footer, footer length or magic), schemas a producer gets wrong (a repeated column
name, names that differ only in case, a type Spark cannot read or a nested type where a scalar was, a
missing key column, a damaged Arrow schema in the footer's metadata), extreme values, and sidecar files.
"""

from __future__ import annotations

import datetime as dt
import decimal
import io
import random
import struct
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

MAGIC = b"PAR1"


@dataclass(frozen=True)
class Chunk:
    """One column chunk: [start, end) in the file; its dictionary page, if any, is [start, data)."""

    row_group: int
    column: str
    start: int
    data: int
    end: int
    dictionary: bool


@dataclass(frozen=True)
class Structure:
    size: int
    chunks: tuple[Chunk, ...]
    footer_start: int
    footer_length: int

    def boundaries(self) -> list[int]:
        """Every offset where one structure ends and the next begins: a cut there leaves whole parts."""
        points = {0, len(MAGIC), self.footer_start, self.size - 8, self.size - 4, self.size}
        for chunk in self.chunks:
            points.update({chunk.start, chunk.data, chunk.end})
        return sorted(p for p in points if 0 <= p <= self.size)


def structure(data: bytes) -> Structure:
    """The structure of a valid Parquet file's bytes."""
    footer_length = struct.unpack("<I", data[-8:-4])[0]
    metadata = pq.ParquetFile(io.BytesIO(data)).metadata
    chunks = []
    for g in range(metadata.num_row_groups):
        group = metadata.row_group(g)
        for c in range(group.num_columns):
            column = group.column(c)
            dictionary = column.has_dictionary_page and column.dictionary_page_offset is not None
            start = column.dictionary_page_offset if dictionary else column.data_page_offset
            chunks.append(
                Chunk(
                    g,
                    column.path_in_schema,
                    start,
                    column.data_page_offset,
                    start + column.total_compressed_size,
                    dictionary and column.data_page_offset > start,
                )
            )
    return Structure(len(data), tuple(chunks), len(data) - 8 - footer_length, footer_length)


@dataclass(frozen=True)
class Damaged:
    """What to land instead of the good file: {path relative to its folder: bytes}; `says` in words."""

    files: dict[str, bytes]
    says: str
    refusable: bool = True  # False: files the pipeline must ignore or apply (sidecars, extreme values)


def _flip(data: bytes, start: int, end: int, rng: random.Random, count: int) -> tuple[bytes, list[int]]:
    out = bytearray(data)
    where = sorted(rng.randrange(start, end) for _ in range(count))
    for offset in where:
        out[offset] ^= rng.choice([0x01, 0x80, 0xFF, rng.randrange(1, 256)])
    return bytes(out), where


def _table(good: bytes) -> pa.Table:
    return pq.read_table(io.BytesIO(good))


def _written(table: pa.Table, **options) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="snappy", **options)
    return sink.getvalue()


def _business(table: pa.Table, keys: tuple[str, ...]) -> list[str]:
    """Columns a producer fills from the source, neither key nor metadata (Op, timestamps, __ fields)."""
    skip = {k.lower() for k in keys} | {"op", "ar_h_change_seq", "last_update_time"}
    return [
        f.name
        for f in table.schema
        if f.name.lower() not in skip and not f.name.startswith("__") and not pa.types.is_nested(f.type)
    ]


# ---------------------------------------------------------------------------------- byte damage


def flip_data_page(good: bytes, rng: random.Random) -> tuple[bytes, str]:
    chunk = rng.choice(structure(good).chunks)
    bad, where = _flip(good, chunk.data, chunk.end, rng, rng.randint(1, 4))
    return bad, f"bytes {where} flipped in the data pages of column {chunk.column}"


def flip_dictionary_page(good: bytes, rng: random.Random) -> tuple[bytes, str]:
    chunks = [c for c in structure(good).chunks if c.dictionary]
    if not chunks:
        return flip_data_page(good, rng)
    chunk = rng.choice(chunks)
    bad, where = _flip(good, chunk.start, chunk.data, rng, rng.randint(1, 3))
    return bad, f"bytes {where} flipped in the dictionary page of column {chunk.column}"


def zero_run(good: bytes, rng: random.Random) -> tuple[bytes, str]:
    """A run of zeros where a page was (a sector lost), anywhere between the magic and the footer."""
    layout = structure(good)
    start = rng.randrange(len(MAGIC), layout.footer_start)
    end = min(layout.footer_start, start + rng.choice([1, 16, 512, 4096]))
    return good[:start] + bytes(end - start) + good[end:], f"bytes {start}..{end} zeroed"


def truncate(good: bytes, rng: random.Random) -> tuple[bytes, str]:
    """Cut at a structural boundary, or one byte either side of it (never the whole file: size 0 is its own kind)."""
    cut = rng.choice(structure(good).boundaries()) + rng.choice([-1, 0, 0, 1])
    cut = max(1, min(cut, len(good) - 1))
    return good[:cut], f"cut after {cut} of {len(good)} bytes"


def flip_footer(good: bytes, rng: random.Random) -> tuple[bytes, str]:
    layout = structure(good)
    bad, where = _flip(good, layout.footer_start, layout.size - 8, rng, rng.randint(1, 3))
    return bad, f"bytes {where} of the footer (file metadata) flipped"


def footer_length(good: bytes, rng: random.Random) -> tuple[bytes, str]:
    layout = structure(good)
    value = rng.choice(
        [0, 1, layout.footer_length - 1, layout.footer_length + 1, layout.size - 8, layout.size, 2**31 - 1, 2**32 - 1]
    )
    return good[:-8] + struct.pack("<I", value) + MAGIC, f"footer length {layout.footer_length} changed to {value}"


def magic(good: bytes, rng: random.Random) -> tuple[bytes, str]:
    where = rng.choice(["leading", "trailing", "both"])
    bad = bytearray(good)
    if where in ("leading", "both"):
        bad[0:4] = rng.choice([b"PAR0", b"\0\0\0\0", b"PARE"])
    if where in ("trailing", "both"):
        bad[-4:] = rng.choice([b"PAR0", b"\0\0\0\0", b"PARE"])
    return bytes(bad), f"{where} magic bytes damaged"


def not_parquet(good: bytes, rng: random.Random) -> tuple[bytes, str]:
    content = rng.choice(
        [b"customer_id,city\n1,Lyon\n", b'{"customer_id": 1}\n', b"<Error><Code>AccessDenied</Code></Error>", b"\0"]
    )
    return content, f"not Parquet at all ({content[:12]!r}...)"


def zero_bytes(good: bytes, rng: random.Random) -> tuple[bytes, str]:
    return b"", "empty (0 bytes)"


# ---------------------------------------------------------------------------------- schema damage


def repeated_column(good: bytes, rng: random.Random, keys: tuple[str, ...]) -> tuple[bytes, str]:
    table = _table(good)
    name = rng.choice(_business(table, keys) or table.column_names)
    return _written(table.append_column(name, table.column(name))), f"column {name} written twice"


def case_collision(good: bytes, rng: random.Random, keys: tuple[str, ...]) -> tuple[bytes, str]:
    table = _table(good)
    name = rng.choice(_business(table, keys) or table.column_names)
    other = name.upper() if name != name.upper() else name.lower()
    return _written(table.append_column(other, table.column(name))), f"column {name} also written as {other}"


def _replace(table: pa.Table, name: str, array: pa.Array) -> pa.Table:
    return table.set_column(table.schema.get_field_index(name), name, array)


_NANOS = pa.timestamp("ns")
_UNREADABLE = {
    "time64[us]": lambda n: pa.array([dt.time(12, 0, i % 60) for i in range(n)], pa.time64("us")),
    "time32[ms]": lambda n: pa.array([dt.time(1, 2, 3)] * n, pa.time32("ms")),
    "duration[s]": lambda n: pa.array(list(range(n)), pa.duration("s")),
    "timestamp[ns]": lambda n: pa.array([dt.datetime(2026, 11, 3, 10, 0, i % 60) for i in range(n)], _NANOS),
}


def unsupported_type(good: bytes, rng: random.Random, keys: tuple[str, ...]) -> tuple[bytes, str]:
    table = _table(good)
    name = rng.choice(_business(table, keys))
    kind = rng.choice(sorted(_UNREADABLE))
    return _written(_replace(table, name, _UNREADABLE[kind](table.num_rows))), f"column {name} written as {kind}"


def nested_type(good: bytes, rng: random.Random, keys: tuple[str, ...]) -> tuple[bytes, str]:
    table = _table(good)
    name = rng.choice(_business(table, keys))
    values = table.column(name).combine_chunks()
    shape = rng.choice(["struct", "list", "map"])
    if shape == "struct":
        nested = pa.StructArray.from_arrays([values], names=["value"])
    elif shape == "list":
        nested = pa.array([[v] for v in values.to_pylist()], pa.list_(values.type))
    else:
        nested = pa.array([[("k", v)] for v in values.to_pylist()], pa.map_(pa.string(), values.type))
    return _written(_replace(table, name, nested)), f"column {name} written as a {shape} of {values.type}"


def missing_key(good: bytes, rng: random.Random, keys: tuple[str, ...]) -> tuple[bytes, str]:
    table = _table(good)
    present = [c for c in table.column_names if c.lower() in {k.lower() for k in keys}]
    if not present:
        return _written(table), "no key column to drop"
    name = rng.choice(present)
    if rng.random() < 0.5:
        return _written(table.drop_columns([name])), f"key column {name} left out"
    return _written(table.rename_columns([c if c != name else f"{c}_renamed" for c in table.column_names])), (
        f"key column {name} renamed"
    )


def arrow_schema_metadata(good: bytes, rng: random.Random) -> tuple[bytes, str]:
    """The footer's ARROW:schema (what pyarrow restores types from; Spark ignores it) replaced by garbage."""
    table = _table(good)
    garbage = rng.choice([b"", b"garbage", bytes(rng.randrange(256) for _ in range(64))])
    bad = table.replace_schema_metadata({b"ARROW:schema": garbage})
    return _written(bad, store_schema=False), "the footer's ARROW:schema metadata damaged"


def _extreme(array: pa.ChunkedArray, rng: random.Random) -> pa.Array:
    t = array.type
    n = len(array)
    if pa.types.is_integer(t):
        info = {8: 2**7, 16: 2**15, 32: 2**31, 64: 2**63}[t.bit_width]
        low, high = (0, 2 * info - 1) if pa.types.is_unsigned_integer(t) else (-info, info - 1)
        return pa.array([rng.choice([low, high, 0]) for _ in range(n)], t)
    if pa.types.is_floating(t):
        return pa.array([rng.choice([float("nan"), float("inf"), -float("inf"), -0.0, 1e308]) for _ in range(n)], t)
    if pa.types.is_decimal(t):
        most = decimal.Decimal("9" * (t.precision - t.scale) + ("." + "9" * t.scale if t.scale else ""))
        return pa.array([rng.choice([most, -most]) for _ in range(n)], t)
    if pa.types.is_timestamp(t):
        ends = [dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59)]
        return pa.array([rng.choice(ends) for _ in range(n)], t)
    if pa.types.is_date(t):
        return pa.array([rng.choice([dt.date(1, 1, 1), dt.date(9999, 12, 31)]) for _ in range(n)], t)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        choices = ["", "x" * 100_000, "\u0000\n\t'\"`;", "\U0001f600 é ß", " "]
        return pa.array([rng.choice(choices) for _ in range(n)], t)
    if pa.types.is_boolean(t):
        return pa.array([rng.choice([True, False, None]) for _ in range(n)], t)
    return pa.nulls(n, t)


def extreme_values(good: bytes, rng: random.Random, keys: tuple[str, ...]) -> tuple[bytes, str]:
    """The smallest, largest and oddest values of a business column's own type: a file to apply, not refuse."""
    table = _table(good)
    name = rng.choice(_business(table, keys))
    return _written(_replace(table, name, _extreme(table.column(name), rng))), f"extreme values in column {name}"


# ---------------------------------------------------------------------------------- the kinds

BYTES = {
    "flip_data_page": flip_data_page,
    "flip_dictionary_page": flip_dictionary_page,
    "zero_run": zero_run,
    "truncate": truncate,
    "flip_footer": flip_footer,
    "footer_length": footer_length,
    "magic": magic,
    "not_parquet": not_parquet,
    "zero_bytes": zero_bytes,
    "arrow_schema_metadata": arrow_schema_metadata,
}
SCHEMA = {
    "repeated_column": repeated_column,
    "case_collision": case_collision,
    "unsupported_type": unsupported_type,
    "nested_type": nested_type,
    "missing_key": missing_key,
    "extreme_values": extreme_values,
}
KINDS = (*BYTES, *SCHEMA, "sidecars", "damaged_crc")
# Kinds whose files the pipeline must take as they are (applied, or ignored), never refuse.
ACCEPTED_KINDS = {"extreme_values", "sidecars", "arrow_schema_metadata"}


def sidecars(good: bytes, name: str, rng: random.Random) -> Damaged:
    """The good file, and what Hadoop-style writers leave beside their data files: a `_SUCCESS` marker, a
    `.crc` checksum file, a `_temporary/` attempt folder holding a half-written part file, a `.tmp` upload."""
    part = good[: rng.randrange(1, len(good))]
    files = {
        name: good,
        "_SUCCESS": b"",
        f".{name}.crc": b"not a Hadoop checksum",  # Hadoop ignores a .crc without its header
        "._SUCCESS.crc": b"",
        f"_temporary/0/_temporary/attempt_20261103_0001_m_000000_0/{name}": part,
        f"{name}.tmp": part,
        f".{name}.inprogress": part,
    }
    return Damaged(files, "sidecar files beside a good file", refusable=False)


def damaged_crc(good: bytes, name: str, rng: random.Random) -> Damaged:
    """The good file with a damaged Hadoop checksum file beside it (its header, then garbage): Hadoop's local
    file system checks it when Spark reads the file, so the good file cannot be read (found by the corpus)."""
    crc = b"crc\0" + bytes(rng.randrange(256) for _ in range(12))
    return Damaged({name: good, f".{name}.crc": crc}, "a damaged .crc checksum file beside a good file")


def damage(good: bytes, name: str, kind: str, seed: int, keys: tuple[str, ...] = ()) -> Damaged:
    """The files to land instead of `name` (a good Parquet file's bytes `good`), `kind` of damage, for `seed`."""
    rng = random.Random(f"{kind}:{seed}")
    if kind == "sidecars":
        return sidecars(good, name, rng)
    if kind == "damaged_crc":
        return damaged_crc(good, name, rng)
    if kind in BYTES:
        bad, says = BYTES[kind](good, rng)
    else:
        bad, says = SCHEMA[kind](good, rng, keys)
    return Damaged({name: bad}, says, refusable=kind not in ACCEPTED_KINDS)
