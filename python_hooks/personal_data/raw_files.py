"""Raw landing files that hold a data subject, rewritten without it (erasure) or with the correction
(rectification). Each new file is written beside the old one under a hidden name (which no reader
lists), then renamed over it: same name, so the ledger still counts it as applied, and a reader sees
the old file or the new one, never half of one."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from python_hooks.personal_data.subjects import ErasureError


def _subject_mask(table, column: str, keys: Sequence[str], producer: str):
    """True for the rows of an Arrow table whose subject column (any case; in a Debezium envelope, in
    `before` or `after`) is one of `keys`."""

    wanted = pa.array(list(keys), type=pa.string())
    by_lower = {name.lower(): name for name in table.column_names}
    values = []
    if column.lower() in by_lower:
        values.append(table.column(by_lower[column.lower()]))
    if producer == "debezium_envelope":
        for image in ("before", "after"):
            if image in by_lower and pa.types.is_struct(table.schema.field(by_lower[image]).type):
                struct = table.column(by_lower[image])
                fields = {f.name.lower(): f.name for f in struct.type}
                if column.lower() in fields:
                    values.append(pc.struct_field(struct, fields[column.lower()]))
    mask = None
    for value in values:
        hit = pc.fill_null(pc.is_in(pc.cast(value, pa.string()), value_set=wanted), False)
        mask = hit if mask is None else pc.or_(mask, hit)
    return mask


def scrub_raw_file(path: Path, column: str, keys: Sequence[str], producer: str) -> int:
    """Rewrites one raw file without the subject's rows; returns how many rows went (0: untouched).
    The new file is written under a hidden name in the same folder (which no reader lists), then
    renamed over the old one: a reader sees the old file or the new one, never half of one."""

    source = pq.ParquetFile(path)
    table = source.read()
    mask = _subject_mask(table, column, keys, producer)
    removed = 0 if mask is None else pc.sum(mask).as_py() or 0
    if not removed:
        return 0
    replace_file(path, source, table.filter(pc.invert(mask)))
    return removed


def replace_file(path: Path, source, table) -> None:
    """Writes `table` under a hidden name beside `path` (which no reader lists), then renames it over
    `path`: a reader sees the old file or the new one, never half of one. Same compression."""

    compression = source.metadata.row_group(0).column(0).compression if source.metadata.num_row_groups else "snappy"
    staged = path.with_name(f".{path.name}.erasing")
    pq.write_table(table, staged, compression=compression.lower() if compression != "UNCOMPRESSED" else "none")
    with open(staged, "rb") as handle:
        os.fsync(handle.fileno())
    os.replace(staged, path)


def _images(table, producer: str) -> list[tuple[str | None, object]]:
    """(struct column or None, the columns it holds by lower-case name): the top level of a DMS or
    flattened Debezium file; `before` and `after` of a Debezium envelope."""

    by_lower = {name.lower(): name for name in table.column_names}
    if producer != "debezium_envelope":
        return [(None, {name.lower(): table.column(name).combine_chunks() for name in table.column_names})]
    images = []
    for image in ("before", "after"):
        if image in by_lower and pa.types.is_struct(table.schema.field(by_lower[image]).type):
            struct = table.column(by_lower[image]).combine_chunks()
            images.append((by_lower[image], {f.name.lower(): struct.field(i) for i, f in enumerate(struct.type)}))
    return images


def raw_personal_values(path: Path, key_column: str, keys: Sequence[str], producer: str, columns: Sequence[str]):
    """{(column, key): {old values as text}} of the subject keys' non-null values of `columns` in one
    raw file, and {column: Arrow type}."""

    values: dict[tuple[str, str], set[str]] = {}
    types: dict[str, object] = {}
    wanted = set(keys)
    for _, image in _images(pq.read_table(path), producer):
        if key_column.lower() not in image:
            continue
        key_text = pc.cast(image[key_column.lower()], pa.string()).to_pylist()
        for column in columns:
            if column not in image:
                continue
            types[column] = image[column].type
            for key, value in zip(key_text, pc.cast(image[column], pa.string()).to_pylist(), strict=True):
                if key in wanted and value is not None:
                    values.setdefault((column, key), set()).add(value)
    return values, types


def rectify_raw_file(path: Path, key_column: str, keys: Sequence[str], producer: str, changes: dict[str, str]) -> int:
    """Rewrites one raw file with the correction `changes` ({column: new value}) in the rows of the
    subject keys (a null stays null); returns how many values changed (0: untouched)."""

    source = pq.ParquetFile(path)
    table = source.read()
    wanted = pa.array(list(keys), type=pa.string())
    changed = 0
    for struct_name, image in _images(table, producer):
        if key_column.lower() not in image:
            continue
        rows = pc.fill_null(pc.is_in(pc.cast(image[key_column.lower()], pa.string()), value_set=wanted), False)
        replaced = {}
        for column, new_value in changes.items():
            if column not in image:
                continue
            old = image[column]
            new = pa.scalar(new_value, pa.string()).cast(old.type)
            hit = pc.and_(rows, pc.and_(pc.is_valid(old), pc.invert(pc.fill_null(pc.equal(old, new), False))))
            count = pc.sum(hit).as_py() or 0
            if count:
                replaced[column] = pc.if_else(hit, new, old)
                changed += count
        if not replaced:
            continue
        if struct_name is None:
            for name in table.column_names:
                if name.lower() in replaced:
                    table = table.set_column(table.schema.get_field_index(name), name, replaced[name.lower()])
        else:
            struct = table.column(struct_name).combine_chunks()
            children = [replaced.get(f.name.lower(), struct.field(i)) for i, f in enumerate(struct.type)]
            rebuilt = pa.StructArray.from_arrays(children, fields=list(struct.type), mask=struct.is_null())
            table = table.set_column(table.schema.get_field_index(struct_name), struct_name, rebuilt)
    if changed:
        replace_file(path, source, table)
    return changed


def arrow_value(value: str, arrow_type):
    """`value` as a scalar of a raw file's column type, or ErasureError."""

    try:
        return pa.scalar(value, pa.string()).cast(arrow_type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
        raise ErasureError(f"{value!r} is not a value of type {arrow_type} ({error})") from None
