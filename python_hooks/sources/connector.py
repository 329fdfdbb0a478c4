"""Which Debezium connector wrote a topic's files, from their Parquet footers only, and the setting each
needs (add-source writes it and prints what it inferred and why).

The evidence, strongest first:
1. the name of the envelope's `source` schema, `io.debezium.connector.<connector>.Source`, in the footer's
   Kafka Connect schema (`kafka.connect.value.schema`, python_hooks/live/sink.py) or the Avro schema the
   Confluent S3 sink keeps (`parquet.avro.schema`, `connect.name`);
2. the fields of the envelope's `source` struct (PostgreSQL `lsn`, `txId`; MySQL `file`, `pos`, `gtid`;
   SQL Server `change_lsn`, `commit_lsn`; Oracle `scn`, `commit_scn`), or a flattened topic's
   `__source_<field>` columns that `add.fields` copied from it;
3. a Debezium named type only one connector writes (`io.debezium.data.Uuid`, `io.debezium.data.Ltree`:
   PostgreSQL).

A flattened topic written with `add.fields=op,source.ts_ms` and no PostgreSQL-only type says nothing:
then the connector is unknown and add-source says what to add by hand.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import pyarrow as pa

# Debezium's PostgreSQL and Oracle connectors write this for a value they did not receive
# (`unavailable.value.placeholder`): a TOASTed column an update left alone, an unchanged LOB.
DEBEZIUM_UNAVAILABLE_VALUE = "__debezium_unavailable_value"
CONNECT_SCHEMA_KEYS = (b"kafka.connect.value.schema", b"parquet.avro.schema", b"avro.schema")


@dataclass(frozen=True)
class Connector:
    """A Debezium connector, what it needs of the project, and how to tell its files."""

    name: str  # postgresql | mysql | sqlserver | oracle
    label: str
    unchanged_value: str | None  # meta.cdc_unchanged_value, or None: it never leaves a value out
    setting: str  # what the user reads about the setting
    source_fields: frozenset[str]  # fields only its `source` struct has (lower case)
    only_types: frozenset[str] = frozenset()  # named types only it writes


CONNECTORS: tuple[Connector, ...] = (
    Connector(
        "postgresql",
        "Debezium's PostgreSQL connector",
        DEBEZIUM_UNAVAILABLE_VALUE,
        f"cdc_unchanged_value: {DEBEZIUM_UNAVAILABLE_VALUE} (a TOASTed value an update left alone under"
        " REPLICA IDENTITY DEFAULT arrives as that placeholder; the table keeps its value)",
        frozenset({"lsn", "xmin"}),
        frozenset({"io.debezium.data.Uuid", "io.debezium.data.Ltree"}),
    ),
    Connector(
        "mysql",
        "Debezium's MySQL connector",
        None,
        "no placeholder setting needed (MySQL has no TOAST; the server must log whole rows, binlog_row_image=FULL)",
        frozenset({"file", "pos", "gtid", "server_id", "row", "thread"}),
    ),
    Connector(
        "sqlserver",
        "Debezium's SQL Server connector",
        None,
        "no placeholder setting needed (SQL Server's change tables hold every column)",
        frozenset({"change_lsn", "commit_lsn", "event_serial_no"}),
    ),
    Connector(
        "oracle",
        "Debezium's Oracle connector",
        DEBEZIUM_UNAVAILABLE_VALUE,
        f"cdc_unchanged_value: {DEBEZIUM_UNAVAILABLE_VALUE} (with lob.enabled=true an update that leaves a"
        " LOB column alone sends that placeholder; the table keeps its value)",
        frozenset({"scn", "commit_scn", "rs_id", "ssn", "redo_thread"}),
    ),
)
BY_NAME: Mapping[str, Connector] = {connector.name: connector for connector in CONNECTORS}


@dataclass(frozen=True)
class Inference:
    """What the footers say: the connector (None when they do not tell) and why."""

    connector: Connector | None
    reason: str


def _connect_documents(schema: pa.Schema) -> list[dict]:
    documents = []
    for key in CONNECT_SCHEMA_KEYS:
        raw = (schema.metadata or {}).get(key)
        if raw is None:
            continue
        try:
            document = json.loads(raw)
        except ValueError:
            continue
        if isinstance(document, dict):
            documents.append(document)
    return documents


def _schema_names(node: object) -> Iterable[str]:
    """Every schema name (Connect `name`, Avro `connect.name` or a record's `name`) in a Connect or
    Avro schema document."""
    if isinstance(node, dict):
        for key in ("name", "connect.name"):
            if isinstance(node.get(key), str):
                yield node[key]
        for value in node.values():
            yield from _schema_names(value)
    elif isinstance(node, list):
        for value in node:
            yield from _schema_names(value)


def _source_field_names(schema: pa.Schema, shape: str | None) -> set[str]:
    """The envelope's `source` struct's fields, or a flattened topic's `__source_<field>` columns."""
    if shape == "envelope":
        for field in schema:
            if field.name.lower() == "source" and pa.types.is_struct(field.type):
                return {field.type.field(i).name.lower() for i in range(field.type.num_fields)}
        return set()
    return {name.lower().removeprefix("__source_") for name in schema.names if name.lower().startswith("__source_")}


def infer_connector(schemas: Iterable[pa.Schema], shape: str | None) -> Inference:
    """The connector that wrote files with these footers, and the evidence, in words."""
    schemas = list(schemas)
    for schema in schemas:
        for document in _connect_documents(schema):
            for name in _schema_names(document):
                parts = name.split(".")
                if name.startswith("io.debezium.connector.") and parts[-1] == "Source" and parts[3] in BY_NAME:
                    return Inference(BY_NAME[parts[3]], f"the footer's Connect schema names the source {name}")
    for schema in schemas:
        fields = _source_field_names(schema, shape)
        for connector in CONNECTORS:
            found = sorted(fields & connector.source_fields)
            if found:
                where = "the envelope's source struct has" if shape == "envelope" else "the flattened rows have"
                prefix = "" if shape == "envelope" else "__source_"
                return Inference(connector, f"{where} {', '.join(prefix + f for f in found)}")
    for schema in schemas:
        names = set()
        for document in _connect_documents(schema):
            names.update(_schema_names(document))
        for connector in CONNECTORS:
            found = sorted(names & connector.only_types)
            if found:
                return Inference(connector, f"a column of type {found[0]}, which only this connector writes")
    return Inference(
        None,
        "the footers name no Debezium connector (no Connect schema with the source's name, no source fields;"
        " add.fields=op,source.ts_ms,source.lsn would tell PostgreSQL)",
    )
