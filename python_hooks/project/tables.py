"""The project's tables as the Python side sees them, read from the dbt manifest (one list, the
project's own: no second list to keep in sync).

`cdc_tables(manifest)`: the current-state models (materialized `cdc_current_state`), each with its
staging model, its source, the source's landing folder and its producer (python_hooks/project/producers.py).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from python_hooks.project.producers import Producer, ProducerKind, debezium_decoded_types, producer_of, source_meta
from python_hooks.project.storage import Location

log = logging.getLogger(__name__)

CURRENT_STATE = "cdc_current_state"  # the materialization of current-state models (macros/cdc/materialization.sql)
# Materializations that make an Iceberg table (views and ephemeral models hold no data).
TABLE_MATERIALIZATIONS = frozenset({"table", "incremental", "snapshot", CURRENT_STATE})


@dataclass(frozen=True)
class CdcTable:
    """A current-state model and where its raw files are."""

    model: str
    schema: str
    identifier: str
    staging_model: str
    source: str
    folder: Location  # the landing folder, through the storage seam (project/storage.py)
    producer: ProducerKind
    timestamp_column: str | None
    source_name: str = ""
    table_name: str = ""
    landing: str = ""  # the source identifier as written (a path or a URI)
    keys: tuple[str, ...] = ()  # the model's unique_key columns
    decoded_types: tuple[tuple[str, str], ...] = ()  # Debezium columns staging decodes: (column, Spark type)
    # the source's placeholder for a value it did not send (meta.cdc_unchanged_value; macros/cdc/unchanged.sql)
    unchanged_value: str | None = None


def key_columns(unique_key) -> tuple[str, ...]:
    """A model's `unique_key` config (a string, comma-separated or not, or a list) as columns."""
    if not unique_key:
        return ()
    if isinstance(unique_key, str):
        return tuple(k.strip() for k in unique_key.split(","))
    return tuple(unique_key)


def is_current_state(node) -> bool:
    return node.resource_type == "model" and node.config.get("materialized") == CURRENT_STATE


def source_of(manifest, source_name: str, table_name: str):
    """The manifest's source `source_name.table_name`."""
    return next(s for s in manifest.sources.values() if s.source_name == source_name and s.name == table_name)


def source_producer(source) -> Producer:
    """The producer of a manifest source."""
    return producer_of(source_meta(source))


def unchanged_value(source) -> str | None:
    """A manifest source's `cdc_unchanged_value`: the table's, else its source's (as macros/cdc/unchanged.sql:
    cdc_unchanged_value reads it)."""
    return (source.meta or {}).get("cdc_unchanged_value") or (source.source_meta or {}).get("cdc_unchanged_value")


def cdc_tables(manifest) -> list[CdcTable]:
    """The project's current-state models, from the dbt manifest, sorted by model name."""
    tables = []
    for node in manifest.nodes.values():
        if not is_current_state(node):
            continue
        parents = [manifest.nodes[n] for n in node.depends_on.nodes if n in manifest.nodes]
        staging = next((p for p in parents if any(s in manifest.sources for s in p.depends_on.nodes)), None)
        if staging is None:
            log.warning("%s: no staging model reading a source: skipped", node.name)
            continue
        source = manifest.sources[next(s for s in staging.depends_on.nodes if s in manifest.sources)]
        producer = source_producer(source)
        tables.append(
            CdcTable(
                model=node.name,
                schema=node.schema,
                identifier=node.alias or node.name,
                staging_model=staging.name,
                source=f"{source.source_name}.{source.name}",
                folder=Location.parse(source.identifier),
                producer=producer.kind,
                timestamp_column=producer.timestamp_column,
                source_name=source.source_name,
                table_name=source.name,
                landing=source.identifier,
                keys=key_columns(node.config.get("unique_key")),
                decoded_types=tuple(debezium_decoded_types(source_meta(source)).items()),
                unchanged_value=unchanged_value(source),
            )
        )
    return sorted(tables, key=lambda t: t.model)


def tests_reading_only(manifest, parents: set[str]) -> dict[str, str]:
    """test unique_id -> test name, for the data tests every parent of which is among `parents` (unique ids)."""
    return {
        uid: node.name
        for uid, node in manifest.nodes.items()
        if node.resource_type == "test" and node.depends_on.nodes and set(node.depends_on.nodes) <= parents
    }
