"""A landing folder's raw table, from its files' Parquet footers only (never the data): the producer's
shape, the business columns and their Spark types; every file checked for what staging needs. The
folder is on this machine or on S3 (python_hooks/project/storage.py)."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pyarrow as pa

from python_hooks.evolution.footers import FooterReadError, TypeConflict, merge_fields, read_footer
from python_hooks.evolution.plan import SchemaShapeError, business_schema
from python_hooks.evolution.types import UnsupportedTypeError, spark_type
from python_hooks.landing.files import raw_files
from python_hooks.project.producers import DEBEZIUM_DECODED_TYPES, DMS_METADATA_COLUMNS
from python_hooks.project.storage import Location, StorageError, StoredFile
from python_hooks.sources.connector import infer_connector
from python_hooks.sources.model import AddSourceError, Column, RawTable


def _debezium_shape(schema: pa.Schema) -> str | None:
    names = {name.lower() for name in schema.names}
    if "__op" in names:
        return "flattened"
    if "op" in names and "source" in names and names & {"after", "before"}:
        return "envelope"
    return None


def _field(schema_or_struct, name: str) -> pa.Field | None:
    fields = list(schema_or_struct)
    return next((f for f in fields if f.name.lower() == name.lower()), None)


def _business_fields(producer: str, shape: str | None, fields: Sequence[pa.Field], ts: str | None) -> list[pa.Field]:
    """The business columns of one file's (or the union's) top-level fields, by the rule the schema
    hook uses (evolution.plan.business_schema); none when an envelope has no before/after image."""
    kind = "dms" if producer == "dms" else f"debezium_{shape}"
    try:
        return list(business_schema(pa.schema(list(fields)), kind, ts if producer == "dms" else None))
    except SchemaShapeError:
        return []


def named_types(schema: pa.Schema) -> dict[str, str]:
    """column (lower case) -> the Debezium type staging decodes (DEBEZIUM_DECODED_TYPES), from a file's footer:
    the Kafka Connect schema (`kafka.connect.value.schema`, python_hooks/live/sink.py) or the Avro schema the
    Confluent S3 sink keeps (`parquet.avro.schema`, `connect.name` per field). Flattened rows and the
    envelope's `before`/`after` images alike."""
    metadata = schema.metadata or {}
    found: dict[str, str] = {}

    def visit(fields: object) -> None:
        for field in fields if isinstance(fields, list) else []:
            if not isinstance(field, dict):
                continue
            name = field.get("field") or field.get("name")
            kinds = field.get("type")
            for kind in kinds if isinstance(kinds, list) else [kinds, field]:
                if not isinstance(kind, dict):
                    continue
                connect = kind.get("connect.name") or (kind.get("name") if "field" in field else None)
                if connect in DEBEZIUM_DECODED_TYPES and isinstance(name, str):
                    found[name.lower()] = connect
                if name in ("before", "after") and isinstance(kind.get("fields"), list):
                    visit(kind["fields"])

    for key in (b"kafka.connect.value.schema", b"parquet.avro.schema", b"avro.schema"):
        if key in metadata:
            try:
                visit(json.loads(metadata[key]).get("fields"))
            except (ValueError, AttributeError):
                continue
    return found


def _some(names: Sequence[str], limit: int = 12) -> str:
    shown = ", ".join(names[:limit]) or "none"
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def read_raw_table(
    producer: str, folder: Location, keys: Sequence[str], timestamp_column: str | None, label: str = "the table"
) -> RawTable:
    """The footers of `folder`'s raw files: the shape, the business columns and their Spark types.
    Refuses a folder without Parquet file, an unreadable footer, a type conflict between files, a file
    without a key column, and files that are not what the producer writes."""
    try:
        files = raw_files(folder, "dms" if producer == "dms" else "debezium")
    except StorageError as error:
        raise AddSourceError(f"{label}: {error}") from None
    where = "its date subfolders" if producer == "dms" else "its partition=<p> folders"
    if not files:
        raise AddSourceError(
            f"no Parquet file in {folder} (nor {where}): land the table's first files there, then run add-source"
        )
    footers: list[tuple[StoredFile, pa.Schema]] = []
    fields: list[pa.Field] = []
    conflicts: list[TypeConflict] = []
    for path in files:
        try:
            schema = read_footer(path)
        except FooterReadError as error:
            raise AddSourceError(f"{label}: {error}") from None
        footers.append((path, schema))
        fields = merge_fields(fields, schema, str(path), conflicts)
    if conflicts:
        raise AddSourceError(f"{label}: {conflicts[0].message()}")

    shape = None
    if producer == "debezium":
        shapes = {path: _debezium_shape(schema) for path, schema in footers}
        for path, found in shapes.items():
            if found is None:
                raise AddSourceError(
                    f"{path} is neither flattened Debezium (an __op column: ExtractNewRecordState with"
                    " add.fields=op,source.ts_ms) nor the envelope (op, source, before/after)"
                )
        first, shape = footers[0][0], shapes[footers[0][0]]
        for path, found in shapes.items():
            if found != shape:
                raise AddSourceError(f"files of {folder} differ in shape: {first} is {shape}, {path} is {found}")
        required = "__source_ts_ms" if shape == "flattened" else "source"
        for path, schema in footers:
            if _field(schema, required) is None:
                raise AddSourceError(f"{path} ({shape} Debezium) has no {required!r} column: the commit time")
    else:
        for path, schema in footers:
            if _field(schema, timestamp_column or "") is None:
                raise AddSourceError(
                    f"the raw file {path.name} of {label} in {folder} has no timestamp column {timestamp_column!r}:"
                    " pass --timestamp-column (the DMS endpoint's TimestampColumnName)"
                )

    if producer == "dms":
        for key in keys:
            if key.lower() in {*DMS_METADATA_COLUMNS, (timestamp_column or "").lower()}:
                raise AddSourceError(f"key column {key!r} of {label} is DMS metadata, not a business column ({folder})")
    for path, schema in footers:
        names = {f.name.lower() for f in _business_fields(producer, shape, list(schema), timestamp_column)}
        for key in keys:
            if key.lower() not in names:
                inside = " (in its before/after images)" if shape == "envelope" else ""
                raise AddSourceError(
                    f"key column {key!r} of {label} is not a column{inside} of the raw file {path.name} in {folder}"
                    f" (its columns: {_some(sorted(names))})"
                )

    decoded: dict[str, str] = {}
    if producer == "debezium":
        for _, schema in footers:
            decoded.update(named_types(schema))
    columns = []
    for f in _business_fields(producer, shape, fields, timestamp_column):
        if any(mark in f.name for mark in ("{{", "{%", "{#")):
            raise AddSourceError(f"column {f.name!r} of {folder}: dbt would read its name as Jinja")
        try:
            data_type = spark_type(f.type)
        except UnsupportedTypeError as error:
            raise AddSourceError(f"column {f.name!r} of {folder}: {error}") from None
        named = decoded.get(f.name.lower())
        columns.append(Column(f.name, DEBEZIUM_DECODED_TYPES[named] if named else data_type, named))
    connector = infer_connector([schema for _, schema in footers], shape) if producer == "debezium" else None
    return RawTable(producer, shape, folder, tuple(files), tuple(columns), connector)
