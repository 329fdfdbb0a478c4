"""Debezium's change events written as the Confluent Kafka Connect S3 sink writes them with
`format.class=ParquetFormat`, `parquet.codec=snappy` and the DefaultPartitioner, for a deployment whose
converter is Kafka Connect's JsonConverter with schemas (what the capture's engine hands over).

What the sink does, and this module too:

- a folder per topic and Kafka partition: <topics root>/<topic>/partition=<p>/;
- a file per run of records, <topic>+<p>+<start offset, 10 digits>.snappy.parquet, named by the Kafka
  offset of its first record; the records of a file have consecutive offsets;
- a file is closed when it holds `flush.size` records, when `rotate.interval.ms` has passed since its
  first record arrived (wall clock; checked whenever the capture hears from the engine, so an idle
  topic's last file lands too), or when a record's schema differs from the file's
  (`schema.compatibility=NONE`: a column added or widened at the source starts a new file);
- Kafka Connect's schema becomes the Parquet schema as Confluent's AvroData and parquet-avro make it:
  int8 and int16 become int32; Connect's Decimal becomes decimal(p, s) (p from
  `connect.decimal.precision`); Connect's Date and Timestamp become date and timestamp(ms, UTC);
  every other named type keeps its base type (Debezium's `io.debezium.time.Date` stays int32 days,
  `MicroTimestamp` int64 micros, `ZonedTimestamp`, `Json` and `Uuid` strings); arrays are lists,
  structs structs, optional fields nullable, in the schema's order. The file's footer keeps the Connect
  schema (CONNECT_SCHEMA_KEY), as the sink's footer keeps the Avro schema made from it
  (`parquet.avro.schema`, with each field's `connect.name`);
- a record with a null value (a tombstone) is not written (`behavior.on.null.values=ignore`);
- a record's partition is Kafka's default partitioner's: murmur2 of the serialized key modulo the
  topic's partition count; a record without a key (a truncate) goes to partition 0.

Where its files differ from the sink's, in physical encodings only (Spark and pyarrow read both alike):
decimals are FIXED_LEN_BYTE_ARRAY (parquet-avro writes BINARY), lists have the 3-level form (parquet-avro's
default is the 2-level `array` form), and the footer keeps the Connect schema, not an Avro one.

What stands in for Kafka is the offsets: a partition's next offset is kept here and recovered at start
from its files (the newest file's start offset plus its rows), since the files are the only durable
record of what was written. A file is written under a hidden name (`.<name>.tmp`: not a raw file for
python_hooks/landing/files.py nor for Spark), flushed to disk and renamed into place, so a reader never
sees half a file; a kill leaves at most a hidden temporary file, removed at the next start.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import logging
import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

log = logging.getLogger(__name__)

CONNECT_SCHEMA_KEY = b"kafka.connect.value.schema"
SUFFIX = ".snappy.parquet"
OFFSET_DIGITS = 10  # the sink's filename.offset.zero.pad.width
TEMP_PREFIX = "."
TEMP_SUFFIX = ".tmp"

CONNECT_DECIMAL = "org.apache.kafka.connect.data.Decimal"
CONNECT_DATE = "org.apache.kafka.connect.data.Date"
CONNECT_TIME = "org.apache.kafka.connect.data.Time"
CONNECT_TIMESTAMP = "org.apache.kafka.connect.data.Timestamp"
PRIMITIVES = {
    "int8": pa.int32(),
    "int16": pa.int32(),
    "int32": pa.int32(),
    "int64": pa.int64(),
    "float32": pa.float32(),
    "float64": pa.float64(),
    "boolean": pa.bool_(),
    "string": pa.string(),
    "bytes": pa.binary(),
}
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
EPOCH_DAY = dt.date(1970, 1, 1)


# ---------------------------------------------------------------------------------------------
# Kafka Connect's schema and values -> Arrow (AvroData + parquet-avro)


def arrow_type(schema: Mapping) -> pa.DataType:
    """The Parquet (Arrow) type the sink writes for a Kafka Connect schema (JsonConverter's form)."""
    name, kind = schema.get("name"), schema["type"]
    if name == CONNECT_DECIMAL:
        parameters = schema.get("parameters") or {}
        precision, scale = int(parameters.get("connect.decimal.precision", 38)), int(parameters["scale"])
        return pa.decimal128(precision, scale) if precision <= 38 else pa.decimal256(precision, scale)
    if name == CONNECT_DATE:
        return pa.date32()
    if name == CONNECT_TIME:
        return pa.time32("ms")
    if name == CONNECT_TIMESTAMP:
        return pa.timestamp("ms", tz="UTC")
    if kind == "struct":
        return pa.struct([arrow_field(child) for child in schema["fields"]])
    if kind == "array":
        item = schema["items"]
        return pa.list_(pa.field("element", arrow_type(item), nullable=bool(item.get("optional"))))
    if kind == "map":
        return pa.map_(arrow_type(schema["keys"]), arrow_type(schema["values"]))
    if kind not in PRIMITIVES:
        raise ValueError(f"Kafka Connect type {kind!r} (field {schema.get('field')!r}) has no Parquet mapping here")
    return PRIMITIVES[kind]


def arrow_field(schema: Mapping) -> pa.Field:
    return pa.field(schema["field"], arrow_type(schema), nullable=bool(schema.get("optional")))


def arrow_schema(value_schema: Mapping) -> pa.Schema:
    """A record's value schema (a struct) as the file's schema, the Connect schema in its footer."""
    fields = [arrow_field(child) for child in value_schema["fields"]]
    return pa.schema(fields, metadata={CONNECT_SCHEMA_KEY: json.dumps(value_schema).encode()})


def arrow_value(schema: Mapping, value: object) -> object:
    """A JsonConverter value as the Python value pyarrow writes for `arrow_type(schema)`: bytes are
    base64 in JSON, a decimal is the base64 of its unscaled two's-complement big-endian integer."""
    if value is None:
        return None
    name, kind = schema.get("name"), schema["type"]
    if name == CONNECT_DECIMAL:
        unscaled = int.from_bytes(base64.b64decode(str(value)), "big", signed=True)
        return Decimal(unscaled).scaleb(-int(schema["parameters"]["scale"]))
    if name == CONNECT_DATE:
        return EPOCH_DAY + dt.timedelta(days=int(value))
    if name == CONNECT_TIMESTAMP:
        return EPOCH + dt.timedelta(milliseconds=int(value))
    if kind == "bytes":
        return base64.b64decode(str(value))
    if kind == "struct":
        return {child["field"]: arrow_value(child, value.get(child["field"])) for child in schema["fields"]}
    if kind == "array":
        return [arrow_value(schema["items"], item) for item in value]
    if kind == "map":
        return [(key, arrow_value(schema["values"], item)) for key, item in value.items()]
    return value


# ---------------------------------------------------------------------------------------------
# Kafka's default partitioner


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (org.apache.kafka.common.utils.Utils.murmur2): a signed 32-bit hash."""
    m, r, mask = 0x5BD1E995, 24, 0xFFFFFFFF
    length = len(data)
    h = (0x9747B28C ^ length) & mask
    whole = length - length % 4
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * m) & mask
        k ^= k >> r
        k = (k * m) & mask
        h = (h * m) & mask
        h ^= k
    rest = length % 4
    if rest == 3:
        h ^= data[whole + 2] << 16
    if rest >= 2:
        h ^= data[whole + 1] << 8
    if rest >= 1:
        h ^= data[whole]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_partition(key: bytes | None, partitions: int) -> int:
    """The partition Kafka's default partitioner gives a keyed record; 0 for a record without a key
    (Kafka would pick one: a truncate event, the one keyless record a table topic carries)."""
    if key is None or partitions == 1:
        return 0
    return (murmur2(key) & 0x7FFFFFFF) % partitions


# ---------------------------------------------------------------------------------------------
# Files


def file_name(topic: str, partition: int, start_offset: int) -> str:
    return f"{topic}+{partition}+{start_offset:0{OFFSET_DIGITS}d}{SUFFIX}"


def start_offset_of(path: Path) -> int | None:
    """The start offset in a sink file's name; None for any other file."""
    match = re.fullmatch(r".+\+\d+\+(\d+)" + re.escape(SUFFIX), path.name)
    return int(match.group(1)) if match else None


def write_atomically(table: pa.Table, path: Path) -> None:
    """The file appears whole or not at all: written under a hidden name, synced, renamed, the folder synced."""
    temporary = path.with_name(f"{TEMP_PREFIX}{path.name}{TEMP_SUFFIX}")
    pq.write_table(table, temporary, compression="snappy")
    with temporary.open("rb") as written:
        os.fsync(written.fileno())
    os.replace(temporary, path)
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


@dataclass(frozen=True)
class Written:
    """A file the sink wrote and its number of records."""

    path: Path
    rows: int


@dataclass
class Landing:
    """What became of one record: `landed` once the file holding it is in place, or at once when the
    sink writes nothing for it (a tombstone, a topic that is not a table's)."""

    landed: bool = False


@dataclass
class PartitionWriter:
    """The open file of one topic partition: its records, their schema, when its first record came."""

    folder: Path
    topic: str
    partition: int
    next_offset: int
    schema: dict | None = None
    rows: list[dict] = field(default_factory=list)
    landings: list[Landing] = field(default_factory=list)
    opened_at: float | None = None

    def add(self, schema: dict, row: dict, landing: Landing, now: float, flush_size: int) -> list[Written]:
        written = self.flush() if self.schema is not None and schema != self.schema else []
        if not self.rows:
            self.schema, self.opened_at = schema, now
        self.rows.append(row)
        self.landings.append(landing)
        if len(self.rows) >= flush_size:
            written += self.flush()
        return written

    def due(self, now: float, rotate_ms: int) -> bool:
        return self.opened_at is not None and (now - self.opened_at) * 1000 >= rotate_ms

    def flush(self) -> list[Written]:
        """Write the open file (nothing when it is empty); its records are then landed."""
        if not self.rows or self.schema is None:
            return []
        table = pa.Table.from_pylist(self.rows, schema=arrow_schema(self.schema))
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / file_name(self.topic, self.partition, self.next_offset)
        write_atomically(table, path)
        for landing in self.landings:
            landing.landed = True
        written = Written(path, len(self.rows))
        self.next_offset += written.rows
        self.rows, self.landings, self.schema, self.opened_at = [], [], None, None
        return [written]


def recover_partition(folder: Path, topic: str, partition: int) -> PartitionWriter:
    """A partition's writer after a start: the next offset from its files; hidden temporary files a
    killed capture left are removed (they were never renamed into place, so never seen)."""
    next_offset = 0
    if folder.is_dir():
        for leftover in folder.glob(f"{TEMP_PREFIX}*{TEMP_SUFFIX}"):
            log.info("sink: removed %s, a file a stopped capture did not finish", leftover)
            leftover.unlink()
        starts = {start: path for path in folder.iterdir() if (start := start_offset_of(path)) is not None}
        if starts:
            newest = max(starts)
            next_offset = newest + pq.ParquetFile(starts[newest]).metadata.num_rows
    return PartitionWriter(folder, topic, partition, next_offset)


class ParquetSink:
    """The files of the table topics (`partitions`: topic -> partition count) under `topics_root`."""

    def __init__(
        self,
        topics_root: Path,
        partitions: Mapping[str, int],
        flush_size: int,
        rotate_ms: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.topics_root = topics_root
        self.partitions = dict(partitions)
        self.flush_size = flush_size
        self.rotate_ms = rotate_ms
        self.clock = clock
        self.writers = {
            (topic, p): recover_partition(topics_root / topic / f"partition={p}", topic, p)
            for topic, count in self.partitions.items()
            for p in range(count)
        }
        self.files_written = 0
        self.records_written = 0

    def put(self, topic: str, key: str | None, value: str | None) -> Landing:
        """One record as JsonConverter serialized it (key and value: JSON with `schema` and `payload`)."""
        if topic not in self.partitions or value is None:
            return Landing(landed=True)
        envelope = json.loads(value)
        schema = envelope["schema"]
        row = arrow_value(schema, envelope["payload"])
        partition = kafka_partition(None if key is None else key.encode(), self.partitions[topic])
        landing = Landing()
        written = self.writers[(topic, partition)].add(schema, row, landing, self.clock(), self.flush_size)
        self._count(written)
        return landing

    def flush_due(self) -> None:
        """Close every file whose rotate interval has passed."""
        now = self.clock()
        for writer in self.writers.values():
            if writer.due(now, self.rotate_ms):
                self._count(writer.flush())

    def flush_all(self) -> None:
        for writer in self.writers.values():
            self._count(writer.flush())

    def buffered(self) -> int:
        return sum(len(writer.rows) for writer in self.writers.values())

    def next_offsets(self) -> dict[str, dict[int, int]]:
        offsets: dict[str, dict[int, int]] = {}
        for (topic, partition), writer in self.writers.items():
            offsets.setdefault(topic, {})[partition] = writer.next_offset
        return offsets

    def _count(self, written: list[Written]) -> None:
        for file in written:
            self.files_written += 1
            self.records_written += file.rows
            log.debug("sink: wrote %s (%d records)", file.path, file.rows)
