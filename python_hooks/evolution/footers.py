"""The union schema of a table's raw Parquet files, from their footers only (never the data).

Files keep the schema they were written with (DMS: new source columns appear in later files only), so
the table must hold the union: by case-insensitive name, first spelling and position win, later files'
new columns are appended in order. When files disagree on a type, the wider one is kept if it is a
promotion of the other (the rules of `evolution.types`); otherwise the disagreement is a `TypeConflict`.
Struct columns are merged field by field (the Debezium `after`/`before` images gain fields).

Which files' columns reach a table is decided in one place, `evolution.apply.inspect_table`: the union
of the new files a run accepts, computed every run from the files listed now (`union_of`). `FooterCache`
only spares reading a footer twice: one entry per file (its location, size, mtime and footer schema);
it never holds a union, so a removed, replaced or refused file's columns cannot outlive the file, and
throwing the cache away changes no plan. It also tells an applied file changed in place since its footer
was read (`FooterCache.read`), which the hook leaves out with a warning.

Files are read through the storage seam (python_hooks/project/storage.py): a local path, a listed
`StoredFile` or a Location, on this machine or on S3; only the footer's bytes are fetched.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import logging
import os
import zlib
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from python_hooks.evolution.types import UnsupportedTypeError, compare_types, spark_type
from python_hooks.project.storage import Location, StorageError, StoredFile, location
from python_hooks.project.warehouse import write_state

logger = logging.getLogger(__name__)


class FooterReadError(Exception):
    """A raw file whose Parquet footer cannot be read."""


@dataclass(frozen=True)
class TypeConflict:
    """Column `column` (dotted inside a struct) is `type_a` in earlier files but `type_b` in `file`."""

    column: str
    file: str
    type_a: str
    type_b: str

    def message(self) -> str:
        return (
            f"Column {self.column!r} is {self.type_a} in earlier raw files but {self.type_b} in {self.file}, "
            f"and neither type widens to the other: fix or remove the file, or send the new values in a new "
            f"column."
        )


@dataclass(frozen=True)
class UnionSchema:
    schema: pa.Schema
    conflicts: tuple[TypeConflict, ...]


RawFile = StoredFile | Location | str | os.PathLike[str]


def read_footer(file: RawFile) -> pa.Schema:
    """The Arrow schema of a Parquet file's footer; FooterReadError naming the file, and saying in words
    what is wrong with it, if it has none or its columns cannot be told apart."""
    path = location(file)
    try:
        schema = pq.read_schema(path.path, filesystem=path.filesystem)
    except Exception as error:  # pyarrow raises OSError, ArrowInvalid, ... for a bad or missing file
        raise _footer_error(path, error) from error
    return _named_apart(path, schema)


def _footer_error(path: Location, error: Exception) -> FooterReadError:
    """Why a file's footer could not be read, in words."""
    if isinstance(error, StorageError):
        return FooterReadError(f"cannot read the Parquet footer of {path}: {error}")
    reason = _unopened(path, error) or _damage(path, error)
    return FooterReadError(f"cannot read the Parquet footer of {path}: {reason}")


def _named_apart(path: Location, schema: pa.Schema) -> pa.Schema:
    """`schema`, when Spark can tell its columns apart (it reads names case-insensitively)."""
    if len(schema) == 0:
        raise FooterReadError(f"the Parquet file {path} has no columns")
    spellings: dict[str, str] = {}
    for name in schema.names:
        first = spellings.setdefault(name.lower(), name)
        if first == name and schema.names.count(name) > 1:
            raise FooterReadError(
                f"the Parquet file {path} has {schema.names.count(name)} columns named {name!r}: Spark cannot"
                " tell them apart; the producer wrote the column twice: write the file with it once"
            )
        if first != name:
            raise FooterReadError(
                f"the Parquet file {path} has columns {first!r} and {name!r}, which differ only in case: Spark"
                " reads column names case-insensitively, so one of them would be lost; write the file with one"
                " spelling"
            )
    return schema


def _same_names_in_chunks(path: Location, metadata: pq.FileMetaData) -> None:
    """Each row group names its columns again (a column chunk's path in the schema). pyarrow reads the
    chunks by position, Spark's Parquet reader by that name: a footer damaged there decodes in pyarrow,
    and Spark fails on it without naming the file (found by the fuzz corpus). Called only once the row
    groups have decoded (`read_pages`): on some damaged footers pyarrow's column-chunk accessor aborts
    the process (a C++ exception it does not catch), where reading the row group raises."""
    paths = [metadata.schema.column(i).path for i in range(metadata.num_columns)]
    for group in range(metadata.num_row_groups):
        chunks = metadata.row_group(group)
        for i in range(chunks.num_columns):
            try:
                named = repr(chunks.column(i).path_in_schema)
            except UnicodeDecodeError:
                named = "with bytes that are not UTF-8"
            if named != repr(paths[i]):
                raise FooterReadError(
                    f"cannot read the Parquet footer of {path}: its footer (the file's metadata) is damaged: row"
                    f" group {group} names its column {i + 1} {named} where the schema says {paths[i]!r}, so Spark"
                    " cannot read it; replace it with a good copy under the same name, or delete it"
                )


_MAGIC = b"PAR1"


def _unopened(path: Location, error: Exception) -> str | None:
    """Why a file could not be opened at all, in words (gone since it was listed, permission denied, the
    object store's own failure); None when it was opened and its bytes are what is wrong."""
    if isinstance(error, OSError) and path.is_s3 or isinstance(error, FileNotFoundError):
        return str(path.failure(error))  # project/storage.py's words (gone since it was listed, ...)
    if isinstance(error, PermissionError):
        return (
            f"permission denied: the user running the pipeline (uid {os.geteuid()}) cannot read it; make it"
            " readable by that user (chmod, chown), then run again"
        )
    return None


THREADED_ROWS = 65_536  # a file of more rows is decoded on threads; a small one costs more so (0.1 ms a file)


def read_pages(file: RawFile, each_group: Callable[[pa.Table], None] | None = None) -> pa.Schema:
    """Reads a raw file whole with pyarrow, decoding every page as a batch will, and returns its footer's
    schema (the footer first, in `read_footer`'s words; the file is opened once); FooterReadError naming the
    file and saying in words what is wrong: gone since it was listed, permission denied, its footer or its
    pages do not decode. `each_group` is handed each row group read (landing/validation.py counts its events
    that a batch would refuse)."""
    path = location(file)
    try:
        stream = path.filesystem.open_input_file(path.path)
    except Exception as error:  # noqa: BLE001 - said in words
        raise _footer_error(path, error) from error
    with stream:
        try:
            parquet = pq.ParquetFile(stream)
            schema = parquet.schema_arrow
        except Exception as error:  # noqa: BLE001 - said in words
            raise _footer_error(path, error) from error
        _named_apart(path, schema)
        try:
            threads = parquet.metadata.num_rows > THREADED_ROWS
            for group in range(parquet.num_row_groups):  # one row group at a time (iter_batches may stop
                rows = parquet.read_row_group(group, use_threads=threads)  # short of a damaged page without a word)
                _text_is_utf8(path, rows)
                if each_group is not None:
                    each_group(rows)
            metadata = parquet.metadata
        except FooterReadError:
            raise
        except StorageError as error:
            raise FooterReadError(f"cannot read the Parquet pages of {path}: {error}") from error
        except Exception as error:  # pyarrow raises OSError, ArrowInvalid, ArrowNotImplementedError, ...
            detail = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            reason = _unopened(path, error) or (
                "its Parquet pages do not decode (damaged in storage or by its producer, or cut short): replace"
                f" it with a good copy under the same name, or delete it; pyarrow says: {detail}"
            )
            raise FooterReadError(f"cannot read the Parquet pages of {path}: {reason}") from error
    _same_names_in_chunks(path, metadata)
    _matches_its_checksum(path)
    return schema


def _text_is_utf8(path: Location, group: pa.Table) -> None:
    """FooterReadError when a text column of a row group (a string, also inside a struct or list) holds bytes that
    are not UTF-8: pyarrow decodes such a page without a word, and Spark would store the bytes as they are."""
    for name, column in zip(group.column_names, group.columns, strict=True):
        try:
            column.validate(full=True)
        except pa.ArrowInvalid as error:
            if "utf8" not in str(error).lower():
                raise
            raise FooterReadError(
                f"cannot read the Parquet pages of {path}: its text column {name!r} holds bytes that are not UTF-8"
                f" text (a text column's values must be; damaged in storage or by its producer): replace it with a"
                f" good copy under the same name, or delete it"
            ) from error


_CRC_MAGIC = b"crc\0"


def _matches_its_checksum(path: Location) -> None:
    """FooterReadError when Hadoop's local file system, which Spark reads a local raw file through, would refuse
    the file for the checksum file beside it (`.<name>.crc`): a CRC32 of every chunk of the file, after a header
    (`crc\\0`, the chunk's size). pyarrow never looks at it. A `.crc` without the header, or that cannot be read,
    Hadoop ignores, and so does this."""
    if not path.is_local:
        return
    crc = path.local_path.with_name(f".{path.name}.crc")
    try:
        sums = crc.read_bytes()
        data = path.local_path.read_bytes() if sums[:4] == _CRC_MAGIC and len(sums) >= 8 else None
    except OSError:
        return
    if data is None:
        return
    chunk = int.from_bytes(sums[4:8], "big", signed=True)
    why = f"it says chunks of {chunk} bytes" if chunk <= 0 else None
    for number, start in enumerate(range(0, len(data), chunk) if why is None else ()):
        stored = sums[8 + 4 * number : 12 + 4 * number]
        if len(stored) < 4:
            why = f"it ends before the file does, at byte {start} of {len(data)}"
        elif zlib.crc32(data[start : start + chunk]) != int.from_bytes(stored, "big"):
            why = f"first at byte {start}"
        if why is not None:
            break
    if why is not None:
        raise FooterReadError(
            f"cannot read {path}: the Hadoop checksum file beside it ({crc.name}) does not match it ({why}), so Spark"
            f" would refuse to read the file: the .crc is stale or damaged, or the file is; delete the stale .crc, or"
            f" replace the file with a good copy under the same name, or delete it"
        )


def _damage(path: Location, error: Exception) -> str:
    """Why pyarrow could not read a file's footer, in words, from the file's first and last bytes: a
    Parquet file is `PAR1`, its pages, its footer, the footer's length (4 bytes), `PAR1`."""
    detail = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    try:
        with path.filesystem.open_input_file(path.path) as stream:
            size = stream.size()
            head = stream.read_at(4, 0) if size >= 4 else b""
            tail = stream.read_at(8, size - 8) if size >= 8 else b""
    except Exception:  # noqa: BLE001 - only an explanation: pyarrow's own words then
        return f"the file is not a readable Parquet file ({detail})"
    damaged = " (an upload in progress or one that failed, or damaged in storage)"
    if size < 12:
        return f"it has {size} bytes, fewer than the smallest Parquet file (12): it is cut short{damaged}"
    if head != _MAGIC:
        return (
            f"it does not begin with Parquet's marker 'PAR1' (it begins with {head!r}): it is not a Parquet file,"
            f" or its start is damaged"
        )
    if tail[4:] != _MAGIC:
        return f"it does not end with Parquet's marker 'PAR1': it is cut short{damaged}"
    length = int.from_bytes(tail[:4], "little")
    if length > size - 12:
        return (
            f"its footer length says {length} bytes but the file holds {size} bytes in all: it is cut short or its"
            f" end is damaged{damaged}"
        )
    return (
        f"its footer (the file's metadata: columns, types, where the pages are) is damaged and cannot be"
        f" decoded{damaged}; pyarrow says: {detail}"
    )


def read_union_schema(paths: Iterable[RawFile]) -> UnionSchema:
    """Union of the footers of `paths`, in the order given."""
    return union_of((str(location(path)), read_footer(path)) for path in paths)


def merge_fields(
    fields: Sequence[pa.Field],
    incoming: Iterable[pa.Field],
    file: str,
    conflicts: list[TypeConflict],
    prefix: str = "",
) -> list[pa.Field]:
    """`fields` with `incoming` (the columns of `file`) merged in; disagreements appended to `conflicts`."""
    merged = list(fields)
    index = {f.name.lower(): i for i, f in reversed(list(enumerate(merged)))}
    for new in incoming:
        lower = new.name.lower()
        if lower not in index:
            index[lower] = len(merged)
            merged.append(new)
        else:
            i = index[lower]
            merged[i] = _merge_field(merged[i], new, file, conflicts, prefix)
    return merged


def _merge_field(old: pa.Field, new: pa.Field, file: str, conflicts: list[TypeConflict], prefix: str) -> pa.Field:
    if old.type.equals(new.type):
        return old
    if pa.types.is_null(old.type):
        return new.with_name(old.name)
    if pa.types.is_null(new.type):
        return old
    if pa.types.is_struct(old.type) and pa.types.is_struct(new.type):
        children = merge_fields(list(old.type), list(new.type), file, conflicts, f"{prefix}{old.name}.")
        return old.with_type(pa.struct(children))
    try:
        old_spark, new_spark = spark_type(old.type), spark_type(new.type)
    except UnsupportedTypeError:
        old_spark = new_spark = None
        relation = "refuse"
    else:
        if old_spark is None:  # a nested type with nulls inside (list<null>): no information yet
            return new.with_name(old.name)
        if new_spark is None:
            return old
        relation = compare_types(old_spark, new_spark).relation
    if relation == "promote":
        return new.with_name(old.name)
    if relation == "refuse":
        conflicts.append(
            TypeConflict(f"{prefix}{old.name}", file, old_spark or str(old.type), new_spark or str(new.type))
        )
    return old


# ------------------------------------------------------------------------------------------- cache


def union_of(footers: Iterable[tuple[str, pa.Schema]]) -> UnionSchema:
    """Union of footers already read, as (file name, schema) pairs in the order given (oldest first)."""
    fields: list[pa.Field] = []
    conflicts: list[TypeConflict] = []
    for name, schema in footers:
        fields = merge_fields(fields, schema, name, conflicts)
    return UnionSchema(pa.schema(fields), tuple(conflicts))


def struct_fields(schema: pa.Schema) -> dict[str, list[str]]:
    """Each struct column's field names, in the file's order, by the column's name in lower case: what Spark's
    `describe query select <column>.* from <the file>` names (a Debezium envelope's `before`, `after`,
    `source`)."""
    return {c.name.lower(): [f.name for f in c.type] for c in schema if pa.types.is_struct(c.type)}


def column_types(schema: pa.Schema) -> dict[str, str]:
    """Lower-case top-level column -> Spark type ('null' for all-null, the Arrow type if Spark has none)."""
    types = {}
    for column in schema:
        try:
            types[column.name.lower()] = spark_type(column.type) or "null"
        except UnsupportedTypeError:
            types[column.name.lower()] = str(column.type)
    return types


@dataclass(frozen=True)
class _Entry:
    """One file's footer as read: the file's size and mtime then, and its schema (no schema metadata)."""

    size: int
    mtime_ns: int
    schema: pa.Schema


def _schema_to_text(schema: pa.Schema) -> str:
    """Exact serialization of a schema (Arrow IPC schema message, base64): types, nesting, field metadata."""
    return base64.b64encode(schema.serialize().to_pybytes()).decode("ascii")


def _schema_from_text(text: str) -> pa.Schema:
    return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(text, validate=True)))


# The state's layout. Version 3 keeps each distinct footer schema once (a table's files nearly always share a few),
# and an entry names it by index: the state grows by a few numbers per file, not by the file's whole schema, and a
# load decodes each schema once. Version 2 (a schema per entry) is read too; any other is read as none.
_STATE_VERSION = 3
_READABLE_VERSIONS = (2, 3)


def _state_from_json(data: object) -> dict[str, dict[str, _Entry]]:
    if not isinstance(data, dict) or data.get("version") not in _READABLE_VERSIONS:
        raise ValueError(f"the state is not a footer cache of version {' or '.join(map(str, _READABLE_VERSIONS))}")
    decoded: dict[str, pa.Schema] = {}  # schema text -> its schema, decoded once and shared by its entries

    def schema(text: str) -> pa.Schema:
        if text not in decoded:
            decoded[text] = _schema_from_text(text)
        return decoded[text]

    if data["version"] == 2:
        texts = None
    else:
        texts = [str(text) for text in data["schemas"]]
    tables: dict[str, dict[str, _Entry]] = {}
    for table, files in data["tables"].items():
        tables[str(table)] = {
            str(name): _Entry(int(size), int(mtime), schema(str(text) if texts is None else texts[int(text)]))
            for name, (size, mtime, text) in files.items()
        }
    return tables


def _state_to_json(tables: dict[str, dict[str, _Entry]]) -> dict[str, object]:
    texts: list[str] = []
    index_of_text: dict[str, int] = {}
    index_of_object: dict[int, int] = {}  # id(schema) -> index: an entry's shared schema is serialized once

    def index(schema: pa.Schema) -> int:
        if id(schema) not in index_of_object:
            text = _schema_to_text(schema)
            if text not in index_of_text:
                index_of_text[text] = len(texts)
                texts.append(text)
            index_of_object[id(schema)] = index_of_text[text]
        return index_of_object[id(schema)]

    entries = {
        table: {name: [e.size, e.mtime_ns, index(e.schema)] for name, e in files.items()}
        for table, files in tables.items()
    }
    return {"version": _STATE_VERSION, "schemas": texts, "tables": entries}


def _stored(file: RawFile) -> StoredFile:
    """A file's size and mtime, as the store says now; FooterReadError naming it when it is not there."""
    path = location(file)
    try:
        found = path.info()
    except StorageError as error:
        raise FooterReadError(f"cannot read the Parquet footer of {path}: {error}") from error
    if found is None:
        raise FooterReadError(f"cannot read the Parquet footer of {path}: no such file")
    return found


@dataclass(frozen=True)
class Footers:
    """What `FooterCache.read` found: (file, footer schema) of the files it can use, in their order, and the
    applied files changed in place since (file -> why, in words), which it left out."""

    schemas: list[tuple[str, pa.Schema]]
    changed: dict[str, str]


def _when(mtime_ns: int) -> str:
    return dt.datetime.fromtimestamp(mtime_ns / 1e9, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _applied_again(listed: StoredFile, entry: _Entry | None) -> tuple[_Entry, None] | tuple[None, str]:
    """An applied file whose footer the cache does not hold as it is now: (its entry, None) when first seen
    (a new cache) and readable; (None, why in words) when its footer cannot be read, or it differs in size
    or mtime from the footer read before (replaced in place), or has 0 bytes now (emptied in place)."""
    if listed.size == 0:
        return None, "it has 0 bytes now"
    try:
        schema = read_footer(listed.location).remove_metadata()
    except FooterReadError as error:
        return None, "its footer cannot be read now: " + str(error).removeprefix(
            f"cannot read the Parquet footer of {listed.location}: "
        )
    if entry is None:
        return _Entry(listed.size, listed.mtime_ns, schema), None
    return None, (
        f"{listed.size} bytes, modified {_when(listed.mtime_ns)} now; {entry.size} bytes, modified"
        f" {_when(entry.mtime_ns)} when its footer was read"
    )


class FooterCache:
    """Each raw file's footer, read once: a per-file cache kept in a JSON state file, and nothing more.

    An entry is a file's location string, its size and mtime when its footer was read, and that footer's
    schema; a file whose size or mtime changed (replaced under the same name) is read again. The union of
    a table is never kept: every call computes it from the files passed (the folder's listing now, minus
    the files the caller refuses), so a removed, replaced or refused file's columns cannot outlive it.
    Entries of files no longer passed for their table are forgotten. The state can always be thrown away
    (a damaged one is): it costs footer reads, never a different answer. Call `save()` to write it.
    """

    def __init__(self, state_path: Path, known: Mapping[str, pa.Schema] | None = None) -> None:
        """`known`: footers read just before (`read_pages`), by location string: not read again."""
        self.state_path = Path(state_path)
        self._tables = self._load()
        self._known = dict(known or {})

    def _load(self) -> dict[str, dict[str, _Entry]]:
        if not self.state_path.exists():
            return {}
        try:
            return _state_from_json(json.loads(self.state_path.read_text(encoding="utf-8")))
        except Exception as error:  # any damage, or an older layout: the state is only an optimisation
            logger.warning(
                "footer cache %s is unreadable (%s: %s): reading every footer again",
                self.state_path,
                type(error).__name__,
                error,
            )
            return {}

    def footers(self, table: str, files: Sequence[RawFile]) -> list[tuple[str, pa.Schema]]:
        """(file, footer schema) of `files`, in their order, reading only footers not read before. A file is
        known by its location's string (a local path, `s3a://...` on S3) and its size and mtime: those
        of the listing for a `StoredFile`, else asked of the store. A footer that cannot be read is a
        FooterReadError naming the file, and leaves the cache as it was."""
        return self.read(table, files).schemas

    def read(self, table: str, files: Sequence[RawFile], applied: Collection[str] = ()) -> Footers:
        """`footers`, but a file whose name is in `applied` (its table's ledger: applied before, never read by
        a batch again) is never a FooterReadError: when it changed in place since its footer was read (size
        or mtime) or its footer cannot be read now, it is in `changed`, with why in words, and not in
        `schemas`; the entry of the footer read before is kept, so that a later run sees the change too."""
        previous = self._tables.get(table, {})
        entries: dict[str, _Entry] = {}
        schemas: list[tuple[str, pa.Schema]] = []
        changed: dict[str, str] = {}
        read = 0
        for path in files:
            listed = path if isinstance(path, StoredFile) else _stored(path)
            name = str(listed.location)
            entry = previous.get(name)
            if entry is not None and (entry.size, entry.mtime_ns) == (listed.size, listed.mtime_ns):
                pass
            elif listed.name not in applied:
                schema = self._known.get(name) or read_footer(listed.location)
                entry = _Entry(listed.size, listed.mtime_ns, schema.remove_metadata())
                read += 1
            else:
                read += 1
                fresh, why = _applied_again(listed, entry)
                if why is not None:
                    changed[name] = why
                    if entry is not None:
                        entries[name] = entry
                    continue
                entry = fresh
            entries[name] = entry
            schemas.append((name, entry.schema))
        logger.debug("%s: %d raw files, %d footers read", table, len(entries), read)
        self._tables[table] = entries
        return Footers(schemas, changed)

    def union_schema(self, table: str, files: Sequence[RawFile], refused: Collection[str] = ()) -> UnionSchema:
        """Union schema of `files` (oldest first) but those named in `refused` (location strings)."""
        return union_of((name, schema) for name, schema in self.footers(table, files) if name not in refused)

    def file_types(self, table: str) -> dict[str, dict[str, str]]:
        """Per file of `table` (as last passed): lower-case column -> Spark type."""
        return {name: column_types(entry.schema) for name, entry in self._tables[table].items()}

    def rewritten(self, files: Iterable[RawFile]) -> None:
        """Files rewritten in place on purpose with the footer they had (an erasure or a rectification:
        personal_data/raw_files.py keeps a file's schema): an entry of the cache (of any table) takes the size
        and mtime the file has now, so that the next run does not take it for an applied file changed in place.
        A file whose footer now differs from its entry's, is gone, or is in no entry is left as it is."""
        holding = {name: entries for entries in self._tables.values() for name in entries}  # file -> its table's
        for file in files:
            name = str(location(file))
            if name not in holding:
                continue
            try:
                listed = _stored(file)
                schema = read_footer(listed.location).remove_metadata()
            except FooterReadError:
                continue
            entry = holding[name][name]
            if schema.equals(entry.schema):
                holding[name][name] = _Entry(listed.size, listed.mtime_ns, entry.schema)

    def save(self) -> None:
        """Write the state atomically (project/warehouse.py: write_state)."""
        write_state(self.state_path, json.dumps(_state_to_json(self._tables), separators=(",", ":"), sort_keys=True))


FOOTER_CACHE = "footer_cache.json"  # the cache's file in the hooks' state folder (project/warehouse.py: state_dir)


def note_rewritten(state_dir: Path, files: Sequence[RawFile]) -> None:
    """Tells the footer cache of `state_dir` that `files` were rewritten in place on purpose, with their footers
    (`FooterCache.rewritten`); nothing when there are none."""
    if not files:
        return
    cache = FooterCache(Path(state_dir) / FOOTER_CACHE)
    cache.rewritten(files)
    cache.save()
