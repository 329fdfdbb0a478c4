"""What add-source is asked for and what it finds: the request, the raw table its footers describe,
the files it will write, and the refusal (one line, nothing written)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from python_hooks.project.storage import Location, StoredFile
from python_hooks.sources.connector import Inference

PRODUCERS = ("dms", "debezium")
PLAIN_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
DBT_NAME = re.compile(r"^[a-z_][a-z0-9_]*$")
KAFKA_TOPIC = re.compile(r"^[A-Za-z0-9._-]+$")


class AddSourceError(Exception):
    """A refusal, in one line naming the file, the table and the column. Nothing was written."""


@dataclass(frozen=True)
class Column:
    name: str  # as the raw files spell it
    data_type: str | None  # Spark SQL type; None while every file holds only nulls
    debezium_type: str | None = None  # a Debezium named type staging decodes (meta.debezium_types)

    @property
    def staging_name(self) -> str:
        return self.name.lower()  # staging lower-cases every business column


@dataclass(frozen=True)
class RawTable:
    """What the footers of a landing folder say."""

    producer: str  # dms | debezium
    shape: str | None  # debezium: flattened | envelope

    @property
    def kind(self) -> str:
        """The producer kind (python_hooks/project/producers.py)."""
        return "dms" if self.producer == "dms" else f"debezium_{self.shape}"

    folder: Location  # on this machine or on S3 (python_hooks/project/storage.py)
    files: tuple[StoredFile, ...]
    columns: tuple[Column, ...]  # business columns only, in file order
    # debezium: the connector its footers name (python_hooks/sources/connector.py) and why
    connector: Inference | None = None


@dataclass(frozen=True)
class Request:
    producer: str
    raw_names: tuple[str, ...]  # (schema, table) or (topic,)
    source_name: str
    table_name: str
    keys: tuple[str, ...]
    timestamp_column: str | None  # dms only

    @property
    def landing_path(self) -> str:
        """The folder under $CDC_LANDING_ROOT."""
        if self.producer == "dms":
            return "dms/" + "/".join(self.raw_names)
        return f"debezium/topics/{self.raw_names[0]}"

    @property
    def label(self) -> str:
        return f"{self.source_name}.{self.table_name}"

    @property
    def staging_model(self) -> str:
        return f"stg_{self.source_name}__{self.table_name}"

    @property
    def current_model(self) -> str:
        return f"{self.source_name}__{self.table_name}"


@dataclass(frozen=True)
class FileWrite:
    path: Path
    text: str
    action: str  # create | append


@dataclass(frozen=True)
class Plan:
    request: Request
    raw: RawTable
    keys: tuple[str, ...]  # as staging names them (lower case)
    writes: tuple[FileWrite, ...]
