"""Plan the schema evolution of an Iceberg table from the schema of new raw files. Pure: no Spark, no I/O.

The plan says which columns to add, which column types to widen (`types.compare_types`), and which
changes to refuse. Applying it is someone else's job (`ColumnChange.sql()` gives the statement;
python_hooks/evolution/apply.py runs it). The rules:

- a new source column is added at the end of the table; a dropped one is kept (null from then on);
- names are compared case-insensitively (Spark resolves them so);
- an incoming type narrower than the table's (an int file into a bigint column) needs nothing;
- any other type change is refused, with a message that names the table, the column and both types.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import pyarrow as pa

from python_hooks.evolution.types import UnsupportedTypeError, compare_types, holds_map, normalize_type, spark_type
from python_hooks.project.producers import DEFAULT_TIMESTAMP_COLUMN, ProducerKind, is_metadata_column
from python_hooks.project.sql import quote_ident, relation_parts

logger = logging.getLogger(__name__)


class SchemaShapeError(ValueError):
    """A raw file schema that does not have the shape its producer writes."""


@dataclass(frozen=True)
class ColumnChange:
    """One schema change to apply. `table` is already rendered (quoted) by the caller."""

    table: str
    column: str
    action: Literal["add_column", "promote_type"]
    old_type: str | None
    new_type: str

    def __post_init__(self) -> None:
        if self.action not in ("add_column", "promote_type"):
            raise ValueError(f"unknown schema change action {self.action!r}")

    def sql(self) -> str:
        if self.action == "add_column":
            return f"ALTER TABLE {self.table} ADD COLUMN {quote_ident(self.column)} {self.new_type}"
        return f"ALTER TABLE {self.table} ALTER COLUMN {quote_ident(self.column)} TYPE {self.new_type}"


@dataclass(frozen=True)
class Refusal:
    """A schema change the pipeline will not make on its own."""

    table: str
    column: str
    old_type: str | None
    new_type: str
    reason: str

    def message(self) -> str:
        model = _model_name(self.table)
        rebuild = (
            f"or fix the source and rebuild the table from all raw files with "
            f"`dbt run --full-refresh --select {model}`."
        )
        if self.old_type is None:
            return (
                f"Table {self.table}: column {quote_ident(self.column)} has type {self.new_type} in the new "
                f"files, which cannot be stored: {self.reason}. Send another type from the source, or leave "
                f"the column out or cast it in the staging model; {rebuild}"
            )
        return (
            f"Table {self.table}: column {quote_ident(self.column)} is {self.old_type} in the table but "
            f"{self.new_type} in the new files: {self.reason}. Keep the type {self.old_type} at the source, "
            f"send the new values in a new column, or cast the column to {self.old_type} in the staging "
            f"model; {rebuild}"
        )


@dataclass(frozen=True)
class Plan:
    table: str
    adds: tuple[ColumnChange, ...]
    promotions: tuple[ColumnChange, ...]
    refusals: tuple[Refusal, ...]

    @property
    def changes(self) -> tuple[ColumnChange, ...]:
        return self.adds + self.promotions

    @property
    def ok(self) -> bool:
        return not self.refusals


def _model_name(table: str) -> str:
    """Last part of a rendered table name (`cat`.`db`.`t``x` -> t`x): the dbt model to --select."""
    return relation_parts(table)[-1]


def business_schema(
    raw: pa.Schema,
    producer: ProducerKind,
    timestamp_column: str | None = DEFAULT_TIMESTAMP_COLUMN,
) -> pa.Schema:
    """The business columns of a raw file schema, without the producer's metadata.

    dms: every column but Op, AR_H_CHANGE_SEQ, the timestamp column, `__*` and `_cdc_*`.
    debezium_flattened: every column but the `__*` fields ExtractNewRecordState adds.
    debezium_envelope: the fields of the `after` struct, then those only `before` has.
    """
    if producer == "dms":
        return pa.schema([f for f in raw if not is_metadata_column(f.name, timestamp_column)])
    if producer == "debezium_flattened":
        return pa.schema([f for f in raw if not f.name.startswith("__")])
    if producer == "debezium_envelope":
        images = []
        for name in ("after", "before"):
            index = raw.get_field_index(name)
            image = raw.field(index) if index >= 0 else None
            if image is not None and pa.types.is_struct(image.type):
                images.append(image)
            elif image is not None and not pa.types.is_null(image.type):
                raise SchemaShapeError(f"the Debezium envelope's `{name}` is {image.type}, not a struct")
        if not images:
            raise SchemaShapeError(
                f"a Debezium envelope needs `after`/`before` struct columns; the file has: {raw.names}"
            )
        fields: list[pa.Field] = []
        seen: set[str] = set()
        for image in images:
            for field in image.type:
                if field.name.lower() not in seen:
                    seen.add(field.name.lower())
                    fields.append(field)
        return pa.schema(fields)
    raise ValueError(f"unknown producer {producer!r}: expected dms, debezium_flattened or debezium_envelope")


# The Arrow types of what staging decodes Debezium's named types into (producers.DEBEZIUM_DECODED_TYPES).
_DECODED_ARROW = {"date": pa.date32(), "timestamp": pa.timestamp("us", tz="UTC")}


def decoded_schema(business: pa.Schema, decoded_types: Mapping[str, str]) -> pa.Schema:
    """`business` with the columns staging decodes (column -> Spark type, `CdcTable.decoded_types`) given
    the type staging makes of them: a Debezium date in days is an int32 in the files and a date in the table."""
    if not decoded_types:
        return business
    fields = []
    for field in business:
        spark = decoded_types.get(field.name.lower())
        fields.append(field.with_type(_DECODED_ARROW[spark]) if spark else field)
    return pa.schema(fields, metadata=business.metadata)


# A batch tells a re-delivered event by a hash of the row's business columns (macros/cdc/current_state.sql:
# cdc_row_hash), and Spark's hash functions take no map, at any depth (DATATYPE_MISMATCH.HASH_MAP_TYPE).
MAP_REASON = (
    "a map (at any depth) cannot be compared with the stored row: the pipeline fingerprints each row with a"
    " hash, which Spark does not compute over a map; write it as a struct, or as an array of key/value structs"
)


def plan_schema_changes(
    table: str,
    current: Sequence[tuple[str, str]] | None,
    incoming: pa.Schema,
    timestamp_column: str | None = DEFAULT_TIMESTAMP_COLUMN,
) -> Plan:
    """What to do to `table` (columns `current`, from DESCRIBE) so that it can hold `incoming`.

    `current` None: the table does not exist yet (dbt creates it): nothing to add or promote, but a type
    that cannot be stored (or two spellings with clashing types) is refused as it would be on an existing
    table: the first build would otherwise make a column of what Spark reads (a duration as bigint). Metadata
    columns (`is_metadata_column`) are ignored; pass `timestamp_column=None` when no column is a DMS timestamp.
    """
    if current is None:
        logger.debug("%s does not exist yet: no schema changes", table)
        first: list[Refusal] = []
        _incoming_columns(table, incoming, timestamp_column, {}, first)
        return Plan(table, (), (), tuple(first))
    table_columns: dict[str, tuple[str, str]] = {}
    for name, type_string in current:
        table_columns.setdefault(name.lower(), (name, type_string))

    refusals: list[Refusal] = []
    columns = _incoming_columns(table, incoming, timestamp_column, table_columns, refusals)
    adds: list[ColumnChange] = []
    promotions: list[ColumnChange] = []
    for lower, (name, new_type) in columns.items():
        if lower not in table_columns:
            adds.append(ColumnChange(table, name, "add_column", None, new_type))
            continue
        table_name, table_type = table_columns[lower]
        comparison = compare_types(table_type, new_type)
        logger.debug("%s.%s: %s vs %s: %s", table, table_name, table_type, new_type, comparison.relation)
        if comparison.relation == "promote":
            promotions.append(
                ColumnChange(table, table_name, "promote_type", normalize_type(table_type), normalize_type(new_type))
            )
        elif comparison.relation == "refuse":
            refusals.append(
                Refusal(table, table_name, normalize_type(table_type), normalize_type(new_type), comparison.reason)
            )
    return Plan(table, tuple(adds), tuple(promotions), tuple(refusals))


def _incoming_columns(
    table: str,
    incoming: pa.Schema,
    timestamp_column: str | None,
    table_columns: dict[str, tuple[str, str]],
    refusals: list[Refusal],
) -> dict[str, tuple[str, str]]:
    """lower name -> (first spelling, Spark type) of the business columns that have a type, in order.

    Several spellings of one name are one column, of the wider type when one widens the other.
    Types that cannot be stored, and spellings with clashing types, go to `refusals`.
    """
    columns: dict[str, tuple[str, str]] = {}
    first_spelling: dict[str, str] = {}
    for field in incoming:
        if is_metadata_column(field.name, timestamp_column):
            continue
        lower = field.name.lower()
        name = first_spelling.setdefault(lower, field.name)
        try:
            new_type = spark_type(field.type)
        except UnsupportedTypeError as error:
            old = table_columns.get(lower)
            old_type = normalize_type(old[1]) if old else None
            refusals.append(Refusal(table, name, old_type, str(field.type), str(error)))
            continue
        if new_type is None:
            logger.debug("%s: column %r has only nulls so far (%s): skipped", table, field.name, field.type)
            continue
        if holds_map(new_type):
            old = table_columns.get(lower)
            old_type = normalize_type(old[1]) if old else None
            refusals.append(Refusal(table, name, old_type, normalize_type(new_type), MAP_REASON))
            continue
        if lower not in columns:
            columns[lower] = (name, new_type)
            continue
        seen_type = columns[lower][1]
        comparison = compare_types(seen_type, new_type)
        if comparison.relation == "promote":
            columns[lower] = (name, new_type)
        elif comparison.relation == "refuse":
            reason = f"the new files also spell it {field.name!r} with another type ({comparison.reason})"
            refusals.append(Refusal(table, name, normalize_type(seen_type), normalize_type(new_type), reason))
    return columns
