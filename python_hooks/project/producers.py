"""The producers of raw change files and the settings that tell them apart: the only reader of a
source's `meta.cdc_producer`, `meta.debezium_shape` and `meta.dms_timestamp_column`
(docs: models/docs/cdc_contract.md; the formats: docs/sources.md).

A producer kind is one of:
    dms                  AWS DMS full-load and CDC files (`Op`, `AR_H_CHANGE_SEQ`, a timestamp column)
    debezium_flattened   Debezium after ExtractNewRecordState (`__op`, `__source_ts_ms`, `__deleted`)
    debezium_envelope    Debezium's full envelope (`before`, `after`, `op`, `source`, `ts_ms`)

`meta.debezium_types` (column: Debezium's Kafka Connect schema name) says which Debezium columns staging
decodes and into which type (DEBEZIUM_DECODED_TYPES): the schema hook plans with those types, not the raw
files' numbers and text.

The staging macros (macros/cdc/staging_dms.sql, staging_debezium.sql) read the same settings in SQL;
tests/pytest/unit/test_rules_pinned.py holds the two sides together.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

ProducerKind = Literal["dms", "debezium_flattened", "debezium_envelope"]

# DMS's TimestampColumnName when a source does not name one (meta.dms_timestamp_column).
DEFAULT_TIMESTAMP_COLUMN = "last_update_time"
# DMS's own columns (lower case; the timestamp column is the source's setting).
DMS_METADATA_COLUMNS: tuple[str, ...] = ("op", "ar_h_change_seq")
# Producer metadata and the pipeline's own columns: never business data (compared in lower case).
METADATA_COLUMNS: frozenset[str] = frozenset({*DMS_METADATA_COLUMNS, "__op", "__source_ts_ms", "__deleted"})
METADATA_PREFIXES: tuple[str, ...] = ("__", "_cdc_")


# Debezium's named types that staging decodes (cdc_debezium_decode) -> the Spark type they become.
DEBEZIUM_DECODED_TYPES: Mapping[str, str] = {
    "io.debezium.time.Date": "date",
    "io.debezium.time.MicroTimestamp": "timestamp",
    "io.debezium.time.Timestamp": "timestamp",
    "io.debezium.time.ZonedTimestamp": "timestamp",
}


@dataclass(frozen=True)
class Producer:
    """A source's producer: its kind and, for DMS, the timestamp column (None for Debezium)."""

    kind: ProducerKind
    timestamp_column: str | None


def producer_of(meta: Mapping[str, object]) -> Producer:
    """The producer a source's meta (source-level meta merged with the table's) declares."""
    if meta.get("cdc_producer") == "debezium":
        shape = meta.get("debezium_shape") or "flattened"
        return Producer("debezium_envelope" if shape == "envelope" else "debezium_flattened", None)
    return Producer("dms", str(meta.get("dms_timestamp_column") or DEFAULT_TIMESTAMP_COLUMN))


def source_meta(source) -> dict:
    """A manifest source's settings: its source's `meta` overridden by the table's own."""
    return {**(source.source_meta or {}), **(source.meta or {})}


def is_metadata_column(name: str, timestamp_column: str | None = DEFAULT_TIMESTAMP_COLUMN) -> bool:
    """True for producer metadata (DMS, Debezium) and the pipeline's `_cdc_` columns; case-insensitive.

    `timestamp_column` is the DMS `TimestampColumnName`; None when the producer writes none.
    """
    lower = name.lower()
    if lower in METADATA_COLUMNS or lower.startswith(METADATA_PREFIXES):
        return True
    return timestamp_column is not None and lower == timestamp_column.lower()


def debezium_decoded_types(meta: Mapping[str, object]) -> dict[str, str]:
    """column (lower case) -> the Spark type staging decodes it into, from a source's `meta.debezium_types`."""
    declared = meta.get("debezium_types") or {}
    if not isinstance(declared, Mapping):
        raise ValueError(f"meta.debezium_types must map columns to Debezium type names, not {declared!r}")
    decoded = {}
    for column, name in declared.items():
        if name not in DEBEZIUM_DECODED_TYPES:
            raise ValueError(
                f"meta.debezium_types names {name!r} for column {column!r}; staging decodes only"
                f" {', '.join(DEBEZIUM_DECODED_TYPES)}"
            )
        decoded[str(column).lower()] = DEBEZIUM_DECODED_TYPES[name]
    return decoded
