"""Raw landing files that hold a data subject, rewritten without it (erasure) or with the correction
(rectification), on this machine's disk or on S3: every file is read and written through the storage
seam (python_hooks/project/storage.py). A new file keeps its old name, so the ledger still counts it
as applied, and replaces the old one whole (`Location.write_bytes`: one PUT on S3, a rename on this
disk): a reader sees the old file or the new one, never half of one. Its compression and its schema
are the old file's."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from python_hooks.landing.files import landing_files
from python_hooks.personal_data.subjects import ErasureError, Holder
from python_hooks.project.storage import Location, StorageError, StoredFile, location

RawFile = StoredFile | Location | str | os.PathLike[str]
_UNCOMPRESSED = "UNCOMPRESSED"
log = logging.getLogger(__name__)


def raw_folder_files(holder: Holder, warn: bool = True) -> list[StoredFile]:
    """The raw files of a raw holder's landing folder (landing/files.py's rule, through the storage
    seam), in name order. An empty file (an upload in progress, or one that failed) holds nothing
    yet: left out, with a warning when `warn`. ErasureError naming the folder when it is neither on
    this machine's disk nor on S3, or cannot be listed (the StorageError's line)."""

    if not holder.folder.reachable:
        raise ErasureError(
            f"{holder.name}: raw files at {holder.folder} are neither on this machine's disk nor on S3 (s3a://,"
            " s3://): Python cannot rewrite them"
        )
    try:
        files = sorted(landing_files(holder.folder))
    except StorageError as error:
        raise ErasureError(f"{holder.name}: {error}") from None
    for file in files:
        if warn and file.size == 0:
            log.warning(
                "%s: %s is empty (an upload in progress?): not read; once it is complete, run the same command again",
                holder.name,
                file,
            )
    return [file for file in files if file.size]


def stopped(error: ErasureError, action: str, rewritten: Sequence[str]) -> str:
    """The line of a failure while raw files were being rewritten, after the register was written."""
    if action == "erase":
        registered = "the keys are registered (staging leaves the subject out already)"
    else:
        registered = "the corrections are registered (staging substitutes them already)"
    return (
        f"{error}; {registered} and {len(rewritten)} raw file(s) were rewritten: run the same {action} again"
        " once this is fixed (running it twice is safe)"
    )


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


def read_raw_file(file: RawFile) -> tuple[pa.Table, str] | None:
    """(the rows of one raw file, its compression as `pq.write_table` names it), or None when there
    is no file there any more (deleted since it was listed: it holds nothing). ErasureError naming
    the file when it cannot be read (a StorageError's line, or not a Parquet file)."""

    where = location(file)
    try:
        with where.open() as handle:
            source = pq.ParquetFile(handle)
            table = source.read()
    except StorageError as error:
        if _gone(where):
            return None
        raise ErasureError(str(error)) from None
    except (OSError, pa.ArrowException) as error:
        raise ErasureError(f"cannot read the raw file {where} as Parquet: {error}") from None
    metadata = source.metadata
    codec = metadata.row_group(0).column(0).compression if metadata.num_row_groups and metadata.num_columns else ""
    return table, "none" if codec in ("", _UNCOMPRESSED) else codec.lower()


def _gone(where: Location) -> bool:
    try:
        return where.info() is None
    except StorageError:
        return False


def write_raw_file(file: RawFile, table: pa.Table, compression: str) -> None:
    """Replaces one raw file by `table`, same name, whole (`Location.write_bytes`): made in memory
    first, so that a failure while writing Parquet leaves the old file as it was."""

    buffer = pa.BufferOutputStream()
    pq.write_table(table, buffer, compression=compression)
    try:
        location(file).write_bytes(buffer.getvalue())
    except StorageError as error:
        raise ErasureError(str(error)) from None


def scrub_raw_file(file: RawFile, column: str, keys: Sequence[str], producer: str) -> int:
    """Rewrites one raw file without the subject's rows; returns how many rows went (0: untouched, or
    no file there any more). Same name, same schema, same compression (`write_raw_file`)."""

    read = read_raw_file(file)
    if read is None:
        return 0
    table, compression = read
    mask = _subject_mask(table, column, keys, producer)
    removed = 0 if mask is None else pc.sum(mask).as_py() or 0
    if not removed:
        return 0
    write_raw_file(file, table.filter(pc.invert(mask)), compression)
    return removed


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


def raw_personal_values(file: RawFile, key_column: str, keys: Sequence[str], producer: str, columns: Sequence[str]):
    """{(column, key): {old values as text}} of the subject keys' non-null values of `columns` in one
    raw file, and {column: Arrow type} (both empty when there is no file there any more)."""

    values: dict[tuple[str, str], set[str]] = {}
    types: dict[str, object] = {}
    wanted = set(keys)
    read = read_raw_file(file)
    if read is None:
        return values, types
    for _, image in _images(read[0], producer):
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


def rectify_raw_file(
    file: RawFile, key_column: str, keys: Sequence[str], producer: str, changes: dict[str, str]
) -> int:
    """Rewrites one raw file with the correction `changes` ({column: new value}) in the rows of the
    subject keys (a null stays null); returns how many values changed (0: untouched, or no file there
    any more). Same name, same schema, same compression (`write_raw_file`)."""

    read = read_raw_file(file)
    if read is None:
        return 0
    table, compression = read
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
        write_raw_file(file, table, compression)
    return changed


def arrow_value(value: str, arrow_type):
    """`value` as a scalar of a raw file's column type, or ErasureError."""

    try:
        return pa.scalar(value, pa.string()).cast(arrow_type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
        raise ErasureError(f"{value!r} is not a value of type {arrow_type} ({error})") from None
