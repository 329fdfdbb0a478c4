"""Independent oracle for real Debezium output (python_hooks/live/): a table's current state replayed
from the Parquet files of its topic, with the values a PostgreSQL driver (psycopg) returns for its
columns. Written from what Debezium 3.6's PostgreSQL connector emits (docs/DEBEZIUM_REAL_OUTPUT.md),
not from the capture's code nor from the project's sample; oracles/replay_debezium.py replays the
sample's shape and does not fit this output (it keeps `__debezium_unavailable_value` as a value, and
decodes no Debezium type).

- Files are read one by one (no hive-style `partition` column); a row's offset is the file's start
  offset plus its index.
- Events apply in source position order: `source.lsn` (envelope) or `__source_lsn` (flattened), then
  partition and offset. PostgreSQL gives each change its own LSN, but snapshot rows (op `r`) share one
  and a primary key change's delete and create share one: (LSN, key) names an event, so an event
  whose (LSN, key) was applied already is a re-delivery and is skipped.
- r, c and u upsert the after-image; d removes the key (its before-image, under REPLICA IDENTITY
  DEFAULT, holds only the key and filler values); t (envelope only) removes every row.
- A value `__debezium_unavailable_value` (its bytes for bytea, a one-element list for an array) is a
  TOASTed value the change did not touch (REPLICA IDENTITY DEFAULT): the row keeps the value it had. A
  primary key change is a delete of the old key and a create of the new key at one LSN (perhaps in two
  partitions): the create's untouched values are the old key's. Within an LSN the delete applies first.
- A column a file does not have (added at the source later) is null.
- Values are decoded by the Kafka Connect schema kept in each file's footer: io.debezium.time.Date
  (days) -> date, MicroTimestamp (micros) -> naive datetime, ZonedTimestamp (ISO-8601 text) -> aware
  datetime, Json (text) -> parsed JSON, Uuid (text) -> UUID; decimals, bytes, lists as Parquet holds them.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pyarrow.parquet as pq

UNAVAILABLE = "__debezium_unavailable_value"
SCHEMA_KEY = b"kafka.connect.value.schema"
EPOCH = dt.datetime(1970, 1, 1)
NAMED: dict[str, Callable[[object], object]] = {
    "io.debezium.time.Date": lambda days: dt.date(1970, 1, 1) + dt.timedelta(days=days),
    "io.debezium.time.MicroTimestamp": lambda micros: EPOCH + dt.timedelta(microseconds=micros),
    "io.debezium.time.ZonedTimestamp": lambda text: dt.datetime.fromisoformat(text),
    "io.debezium.data.Json": lambda text: json.loads(text),
    "io.debezium.data.Uuid": lambda text: uuid.UUID(text),
}


def unavailable(value: object) -> bool:
    """The placeholder, in a text, bytea or array column."""
    return value in (UNAVAILABLE, UNAVAILABLE.encode()) or value == [UNAVAILABLE]


def decode(schema: Mapping, value: object) -> object:
    """A Parquet value as the Python value of its source column (the field's Kafka Connect schema)."""
    if value is None or unavailable(value):
        return value
    if schema.get("name") in NAMED:
        return NAMED[schema["name"]](value)
    if schema["type"] == "struct":
        return {f["field"]: decode(f, value.get(f["field"])) for f in schema["fields"]}
    if schema["type"] == "array":
        return [decode(schema["items"], item) for item in value]
    return value


def read_events(topic_dir: Path) -> list[dict]:
    """Every record of the topic, decoded, with its partition and offset."""
    events = []
    for path in sorted(Path(topic_dir).glob("partition=*/*.parquet")):
        partition = int(path.parent.name.split("=", 1)[1])
        start = int(path.name.rsplit("+", 1)[1].split(".", 1)[0])
        file = pq.ParquetFile(path)
        schema = json.loads(file.schema_arrow.metadata[SCHEMA_KEY])
        fields = {f["field"]: f for f in schema["fields"]}
        for index, row in enumerate(file.read().to_pylist()):
            record = {name: decode(fields[name], value) for name, value in row.items()}
            events.append({"partition": partition, "offset": start + index, "file": path.name, "record": record})
    return events


def _normalized(record: dict, shape: str) -> tuple[str, int, dict | None]:
    """(op, LSN, the row image: after-image, before-image for a delete, None for a truncate)."""
    if shape == "envelope":
        op = record["op"]
        return op, record["source"]["lsn"], record["after"] if op in ("r", "c", "u") else record["before"]
    row = {name: value for name, value in record.items() if not name.startswith("__")}
    return record["__op"], record["__source_lsn"], row


def replay(topic_dir: Path, shape: str, key: Sequence[str]) -> tuple[dict[tuple, dict], int]:
    """key tuple -> the row's columns; and how many events were re-deliveries (skipped)."""
    ordered = []
    for event in read_events(topic_dir):
        op, lsn, image = _normalized(event["record"], shape)
        ordered.append((lsn, op != "d", event["partition"], event["offset"], op, image, event))
    ordered.sort(key=lambda item: item[:4])
    state: dict[tuple, dict] = {}
    applied: set[tuple] = set()
    removed: dict[int, dict] = {}  # LSN -> the row its delete removed (a key change's old row)
    redelivered = 0
    for lsn, _, _, _, op, image, event in ordered:
        k = None if image is None else tuple(image[c] for c in key)
        if (lsn, k) in applied:
            redelivered += 1
            continue
        applied.add((lsn, k))
        if op == "t":
            state.clear()
        elif op == "d":
            if k in state:
                removed[lsn] = state.pop(k)
        elif op in ("r", "c", "u"):
            before = state.get(k) or (removed.get(lsn, {}) if op == "c" else {})
            state[k] = {name: before.get(name) if unavailable(value) else value for name, value in image.items()}
        else:
            raise ValueError(f"unknown op {op!r} in {event['file']} offset {event['offset']}")
    return state, redelivered
