"""The soak's sources, and their raw files as the producers write them: one file per table per simulated
minute, late files, re-delivered files, one new column.

- DMS tables (odd numbers): `dms/soak_dms/tNN/`, written by sample_data/dms.py's writer (a full load
  `LOAD00000001.parquet` without `Op`, then CDC files named by their write time, `Op` first,
  `last_update_time`, `AR_H_CHANGE_SEQ` last; deletes carry the key only). A late file is written at its
  minute and lands LATE_BY minutes later, after files named after it; a re-delivery is an earlier file
  landing again under a new name (a task restart sends the same changes again).
- Debezium tables (even numbers): topic `soak.soak_dbz.tNN`, written by the live capture's S3-sink writer
  (python_hooks/live/sink.py: the sink's file names and offsets, the Kafka Connect schema as Parquet),
  flattened by `ExtractNewRecordState` (`__op`, `__source_ts_ms`, `__deleted`); an initial snapshot (`r`),
  then the minute's changes. A late event is held back and delivered LATE_BY minutes later (a larger
  offset, an older `__source_ts_ms`); a re-delivery is a minute's events again, at new offsets (at least once).

Every file that lands is also copied, as it landed, under the work folder's `pristine/` (the erasure
rewrites raw files in place: the batch log counted what the files held when their batch read them).
The data is random with the seed; the subject the soak erases is left alone from a few minutes before
the erasure on, so that nothing landing after it carries it (settings.py: LATE_BY, REDELIVER_LAG).
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import random
import shutil
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from python_hooks.live import sink
from sample_data import dms
from soak.settings import LATE_BY, REDELIVER_LAG, Settings, late_minute, redelivery_minute

START = dt.datetime(2026, 11, 10, tzinfo=dt.timezone.utc)  # minute 0 of the simulated day
KEY = "customer_id"
DMS_SCHEMA = "soak_dms"
DEBEZIUM_SOURCE = "soak_dbz"
TOPIC_PREFIX = f"soak.{DEBEZIUM_SOURCE}"
NEW_COLUMN = "tier"  # the schema change: a column added at the source of table 1 (DMS)
SUBJECT = "customer"  # declared on tables 1 and 2 (meta.cdc_subjects), erased once
CITIES = ["Lisbon", "Lagos", "Lyon", "Pune", "Krakow", "Osaka", "Turin", "Bergen"]
TIERS = ["bronze", "silver", "gold"]
COLUMNS = {
    KEY: pa.int64(),
    "name": pa.string(),
    "city": pa.string(),
    "amount": pa.decimal128(12, 2),
    "version": pa.int32(),
}
CONNECT_COLUMNS = [
    {"field": KEY, "type": "int64", "optional": False},
    {"field": "name", "type": "string", "optional": True},
    {"field": "city", "type": "string", "optional": True},
    {
        "field": "amount",
        "type": "bytes",
        "optional": True,
        "name": sink.CONNECT_DECIMAL,
        "version": 1,
        "parameters": {"scale": "2", "connect.decimal.precision": "12"},
    },
    {"field": "version", "type": "int32", "optional": True},
]
FLAT_FIELDS = [
    {"field": "__op", "type": "string", "optional": True},
    {"field": "__source_ts_ms", "type": "int64", "optional": True},
    {"field": "__deleted", "type": "string", "optional": True},
]
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


@dataclass
class Change:
    op: str  # I, U, D; "L" for a full-load (DMS) or snapshot (Debezium) row
    row: dict
    ts: dt.datetime


def at(minute: int, second: float = 0.0) -> dt.datetime:
    return START + dt.timedelta(minutes=minute, seconds=second)


def dms_file_name(written: dt.datetime) -> str:
    """A DMS CDC file's name: the time it was written, `<yyyymmdd-hhmmssfff>.parquet`."""
    return f"{written:%Y%m%d-%H%M%S}{written.microsecond // 1000:03d}.parquet"


def connect_decimal(value: Decimal | None, scale: int = 2) -> str | None:
    """JsonConverter's form of a Connect Decimal: base64 of the unscaled two's-complement big-endian integer."""
    if value is None:
        return None
    unscaled = int(value.scaleb(scale))
    return base64.b64encode(unscaled.to_bytes(unscaled.bit_length() // 8 + 1, "big", signed=True)).decode()


@dataclass
class Table:
    index: int  # 1-based
    settings: Settings
    landing: Path
    pristine: Path
    outbox: Path
    rng: random.Random = field(init=False)
    live: dict[int, dict] = field(default_factory=dict)
    next_key: int = 0
    sequence: int = 0
    avoid: set[int] = field(default_factory=set)
    columns: dict[str, pa.DataType] = field(default_factory=lambda: dict(COLUMNS))
    held: dict[int, list] = field(default_factory=dict)  # landing minute -> DMS outbox files / Debezium records
    recent: dict[int, object] = field(default_factory=dict)  # minute -> its landed DMS file / Debezium records
    landed: list[str] = field(default_factory=list)  # paths under the landing root, in landing order
    writer: sink.ParquetSink | None = None

    def __post_init__(self) -> None:
        self.rng = random.Random(f"{self.settings.seed}-{self.index}")
        self.next_key = self.settings.rows + 1

    # ------------------------------------------------------------------ names

    @property
    def name(self) -> str:
        return f"t{self.index:02d}"

    @property
    def producer(self) -> str:
        return "dms" if self.index % 2 else "debezium"

    @property
    def topic(self) -> str:
        return f"{TOPIC_PREFIX}.{self.name}"

    @property
    def source(self) -> str:
        return DMS_SCHEMA if self.producer == "dms" else DEBEZIUM_SOURCE

    @property
    def model(self) -> str:
        return f"{self.source}__{self.name}"

    @property
    def relative_folder(self) -> Path:
        if self.producer == "dms":
            return Path("dms") / DMS_SCHEMA / self.name
        return Path("debezium") / "topics" / self.topic

    @property
    def folder(self) -> Path:
        return self.landing / self.relative_folder

    def add_source_args(self) -> list[str]:
        names = ["dms", DMS_SCHEMA, self.name] if self.producer == "dms" else ["debezium", self.topic]
        return ["add-source", *names, "--key", KEY]

    # ------------------------------------------------------------------ the source's changes

    def _row(self, key: int, version: int) -> dict:
        row = {
            KEY: key,
            "name": f"Customer {key} v{version}",
            "city": self.rng.choice(CITIES),
            "amount": Decimal(self.rng.randint(0, 10**7)).scaleb(-2),
            "version": version,
        }
        if NEW_COLUMN in self.columns:
            row[NEW_COLUMN] = self.rng.choice(TIERS)
        return row

    def full_load(self) -> list[Change]:
        changes = []
        for key in range(1, self.settings.rows + 1):
            self.live[key] = self._row(key, 0)
            changes.append(Change("L", dict(self.live[key]), START))
        return changes

    def changes(self, minute: int) -> list[Change]:
        """The minute's changes at the source, in commit order: inserts, updates and deletes of live keys."""
        changes = []
        count = self.settings.changes
        for i in range(count):
            ts = at(minute, i * 50.0 / count)
            candidates = [k for k in self.live if k not in self.avoid]
            draw = self.rng.random()
            if draw < 0.25 or len(candidates) < 10:
                key, self.next_key = self.next_key, self.next_key + 1
                self.live[key] = self._row(key, 0)
                changes.append(Change("I", dict(self.live[key]), ts))
            elif draw < 0.85:
                key = self.rng.choice(candidates)
                self.live[key] = self._row(key, self.live[key]["version"] + 1)
                changes.append(Change("U", dict(self.live[key]), ts))
            else:
                key = self.rng.choice(candidates)
                changes.append(Change("D", self.live.pop(key), ts))
        return changes

    def add_column(self) -> None:
        self.columns[NEW_COLUMN] = pa.string()

    # ------------------------------------------------------------------ files

    def land(self, minute: int, changes: list[Change], last_minute: bool = False) -> None:
        """The minute's file(s) of this table, as its producer writes them; held files whose minute came."""
        if self.producer == "dms":
            self._land_dms(minute, changes, last_minute)
        else:
            self._land_debezium(minute, changes, last_minute)

    def _due(self, minute: int, last_minute: bool) -> list:
        due = []
        for when in sorted(self.held):
            if when <= minute or last_minute:
                due += self.held.pop(when)
        return due

    def _dms_event(self, change: Change) -> dms.Event:
        row = {name: change.row.get(name) for name in self.columns}
        if change.op == "L":
            return dms.Event(self.name, None, change.ts, row)
        if change.op == "D":  # the key only (the source's default REPLICA IDENTITY)
            row = {name: (change.row[KEY] if name == KEY else None) for name in self.columns}
        self.sequence += 1
        return dms.Event(self.name, change.op, change.ts, row, f"{change.ts:%Y%m%d%H%M%S}{self.sequence:021d}")

    def _land_dms(self, minute: int, changes: list[Change], last_minute: bool) -> None:
        dms.TABLES[self.name] = self.columns  # the writer reads a table's columns there (test_add_source does too)
        name = "LOAD00000001.parquet" if minute == 0 else dms_file_name(at(minute, 59))
        raw = dms.RawFile(self.name, name, [self._dms_event(change) for change in changes])
        late = late_minute(self.index, minute) and not last_minute
        folder = (self.outbox / self.relative_folder) if late else self.folder
        folder.mkdir(parents=True, exist_ok=True)
        pq.write_table(dms._table(raw), folder / name, compression="snappy")
        if late:
            self.held.setdefault(minute + LATE_BY, []).append(folder / name)
        else:
            self._landed(folder / name)
            self.recent[minute] = folder / name
        for held in self._due(minute, last_minute):
            self.folder.mkdir(parents=True, exist_ok=True)
            shutil.move(held, self.folder / held.name)
            self._landed(self.folder / held.name)
        again = self.recent.get(minute - REDELIVER_LAG)
        if redelivery_minute(self.index, minute) and again is not None:
            copy = self.folder / dms_file_name(at(minute, 59.5))
            shutil.copyfile(self.pristine / Path(again).relative_to(self.landing), copy)
            self._landed(copy)
        self.recent.pop(minute - REDELIVER_LAG - 1, None)

    def _debezium_record(self, change: Change) -> tuple[str, str]:
        op = {"L": "r", "I": "c", "U": "u", "D": "d"}[change.op]
        fields = CONNECT_COLUMNS + FLAT_FIELDS
        value_schema = {"type": "struct", "fields": fields, "optional": False, "name": f"{self.topic}.Value"}
        payload = {name["field"]: change.row.get(name["field"]) for name in CONNECT_COLUMNS}
        payload["amount"] = connect_decimal(payload["amount"])
        payload["__op"] = op
        payload["__source_ts_ms"] = (change.ts - EPOCH) // dt.timedelta(milliseconds=1)
        payload["__deleted"] = "true" if op == "d" else "false"
        key_schema = {"type": "struct", "fields": CONNECT_COLUMNS[:1], "optional": False}
        key = json.dumps({"schema": key_schema, "payload": {KEY: change.row[KEY]}})
        return key, json.dumps({"schema": value_schema, "payload": payload})

    def _land_debezium(self, minute: int, changes: list[Change], last_minute: bool) -> None:
        if self.writer is None:
            self.writer = sink.ParquetSink(self.landing / "debezium" / "topics", {self.topic: 1}, 10**9, 10**9)
        records = [self._debezium_record(change) for change in changes]
        if late_minute(self.index, minute) and not last_minute:
            late = next((i for i, change in enumerate(changes) if change.op == "U"), None)
            if late is not None:  # an update committed now, delivered LATE_BY minutes later
                self.held.setdefault(minute + LATE_BY, []).append(records.pop(late))
        self.recent[minute] = list(records)
        records += self._due(minute, last_minute)
        if redelivery_minute(self.index, minute):
            records += self.recent.get(minute - REDELIVER_LAG) or []
        self.recent.pop(minute - REDELIVER_LAG - 1, None)
        partition = self.writer.writers[(self.topic, 0)]
        start = partition.next_offset
        for key, value in records:
            self.writer.put(self.topic, key, value)
        self.writer.flush_all()
        if records:
            self._landed(partition.folder / sink.file_name(self.topic, 0, start))

    def _landed(self, path: Path) -> None:
        relative = path.relative_to(self.landing)
        copy = self.pristine / relative
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, copy)
        self.landed.append(relative.as_posix())


def make_tables(settings: Settings) -> list[Table]:
    work = settings.work
    return [
        Table(index, settings, work / "landing", work / "pristine", work / "outbox")
        for index in range(1, settings.tables + 1)
    ]


def holders(tables: list[Table]) -> list[Table]:
    """The tables that declare the erased subject: the first DMS and the first Debezium table."""
    return tables[:2]


def choose_subject(tables: list[Table]) -> int:
    """A key live in both holder tables (the subject erased); from now on their sources leave it alone."""
    first, second = holders(tables)
    both = sorted(set(first.live) & set(second.live)) or sorted(first.live)
    key = random.Random(first.settings.seed).choice(both)
    for table in (first, second):
        table.avoid.add(key)
    return key
