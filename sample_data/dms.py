"""AWS DMS sample output: PostgreSQL source `crm`, S3 target with `DataFormat=parquet`.

Writes what DMS writes (see ../shared/CDC_FORMATS.md): per table, full-load files
`LOAD<8 hex digits>.parquet` without `Op`, then CDC files named by their write time
`<yyyymmdd-hhmmssfff>.parquet` with `Op` first. Every file has the `TimestampColumnName`
column `last_update_time` (commit time of a change, load time of a full-load row); CDC files
end with `AR_H_CHANGE_SEQ`, 35 digits, the only total order DMS offers. Deletes carry the key
only (the source table has the default REPLICA IDENTITY). Timestamps are INT64 micros (UTC).

The data is fixed, not random: each stage is a list of change events designed to contain the
hard cases the pipeline must get right (named in `HARD_CASES`). Times are sample time (2026-11-01..04),
moved to the demo's clock when written if CDC_SAMPLE_TIMES=now (sample_data/clock.py).
"""

from __future__ import annotations

import datetime as dt
import itertools
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from sample_data import clock

SCHEMA = "crm"
STAGES = 4
TIMESTAMP = pa.timestamp("us", tz="UTC")

# Source table definitions: column name -> Arrow type, key first.
TABLES: dict[str, dict[str, pa.DataType]] = {
    "customer_master": {
        "customer_id": pa.int64(),
        "first_name": pa.string(),
        "last_name": pa.string(),
        "employer_name": pa.string(),
        "email_id": pa.string(),
        "row_audit_ts": TIMESTAMP,
    },
    "customer_address": {
        "customer_id": pa.int64(),
        "city": pa.string(),
        "country": pa.string(),
        "row_audit_ts": TIMESTAMP,
    },
}
KEYS = {"customer_master": ["customer_id"], "customer_address": ["customer_id"]}

HARD_CASES = {
    "inserts, updates, deletes": "every stage",
    "delete then re-insert of one key": "customer 9 (stage 2 D, I in one file), customer 10 (D stage 3, I stage 4)",
    "several changes of one key in one file": "customer 5: three updates in stage 2's first file",
    "equal last_update_time, ordered only by AR_H_CHANGE_SEQ": "customer 6, customer address 6 (stage 2)",
    "late, out-of-order file": "stage 3's second file is named before its first and holds older changes "
    "of customers 3, 5 and 7 (7 was deleted in stage 2: the late update must not bring it back)",
    "exact duplicate event": "customer 8's update twice in one stage-2 file and again in stage 3",
    "delete of a key that never existed": "customer 999 (stage 2), address 998 (stage 3)",
}

FIRST = ["Ana", "Ben", "Chloe", "Dev", "Ewa", "Farid", "Grace", "Hiro", "Ines", "Jon", "Kemal", "Lena"]
LAST = ["Silva", "Okafor", "Martin", "Patel", "Nowak", "Haddad", "Kim", "Sato", "Rossi", "Berg"]
EMPLOYERS = ["Acme Corp", "Globex", "Initech", "Umbrella", "Hooli", "Stark Industries"]
CITIES = [
    ("Lisbon", "Portugal"),
    ("Lagos", "Nigeria"),
    ("Lyon", "France"),
    ("Pune", "India"),
    ("Krakow", "Poland"),
    ("Osaka", "Japan"),
    ("Turin", "Italy"),
    ("Bergen", "Norway"),
]

LOAD_TIME = dt.datetime(2026, 11, 1, 8, 0, 0, tzinfo=dt.timezone.utc)


@dataclass
class Event:
    """One row of a DMS file: op None for a full-load row."""

    table: str
    op: str | None
    commit_ts: dt.datetime
    row: dict
    seq: str | None = None  # AR_H_CHANGE_SEQ, assigned in commit order


@dataclass
class RawFile:
    table: str
    name: str
    events: list[Event] = field(default_factory=list)


def _customer(i: int, version: int = 0) -> dict:
    first = FIRST[(i + version) % len(FIRST)]
    last = LAST[(i * 3) % len(LAST)]
    return {
        "customer_id": i,
        "first_name": first,
        "last_name": last,
        "employer_name": EMPLOYERS[(i + 2 * version) % len(EMPLOYERS)],
        "email_id": f"{first.lower()}.{last.lower()}{i}{'' if version == 0 else f'+v{version}'}@example.com",
        "row_audit_ts": LOAD_TIME - dt.timedelta(days=30 - i % 30) + dt.timedelta(hours=version),
    }


def _address(i: int, version: int = 0) -> dict:
    city, country = CITIES[(i + version) % len(CITIES)]
    return {
        "customer_id": i,
        "city": city,
        "country": country,
        "row_audit_ts": LOAD_TIME - dt.timedelta(days=20 - i % 20) + dt.timedelta(hours=version),
    }


def _at(day: int, hour: int, minute: int, second: int = 0) -> dt.datetime:
    return dt.datetime(2026, 11, day, hour, minute, second, tzinfo=dt.timezone.utc)


def _key_only(table: str, key: int) -> dict:
    return {name: (key if name in KEYS[table] else None) for name in TABLES[table]}


def _ev(table: str, op: str, ts: dt.datetime, row: dict) -> Event:
    return Event(table, op, ts, row)


def _stage_files() -> list[list[RawFile]]:
    """All files of all stages, in landing order. Sequences are assigned afterwards in commit order."""
    cm, ca = "customer_master", "customer_address"
    stages: list[list[RawFile]] = []

    # Stage 1: full load, split over two files per table as DMS does for larger tables.
    stages.append(
        [
            RawFile(cm, "LOAD00000001.parquet", [Event(cm, None, LOAD_TIME, _customer(i)) for i in range(1, 11)]),
            RawFile(cm, "LOAD00000002.parquet", [Event(cm, None, LOAD_TIME, _customer(i)) for i in range(11, 21)]),
            RawFile(ca, "LOAD00000001.parquet", [Event(ca, None, LOAD_TIME, _address(i)) for i in range(1, 21)]),
        ]
    )

    # Stage 2: the first CDC batch.
    t = _at(2, 9, 0)
    dup8 = _ev(cm, "U", t + dt.timedelta(minutes=7), _customer(8, 1))
    stages.append(
        [
            RawFile(
                cm,
                "20261102-091500000.parquet",
                [
                    _ev(cm, "I", t, _customer(21)),
                    _ev(cm, "I", t + dt.timedelta(minutes=1), _customer(22)),
                    _ev(cm, "U", t + dt.timedelta(minutes=2), _customer(3, 1)),
                    _ev(cm, "U", t + dt.timedelta(minutes=2, seconds=30), _customer(4, 1)),
                    # several changes of one key in one file
                    _ev(cm, "U", t + dt.timedelta(minutes=3), _customer(5, 1)),
                    _ev(cm, "U", t + dt.timedelta(minutes=4), _customer(5, 2)),
                    _ev(cm, "U", t + dt.timedelta(minutes=5), _customer(5, 3)),
                    # equal last_update_time: only AR_H_CHANGE_SEQ orders them (version 2 is last)
                    _ev(cm, "U", t + dt.timedelta(minutes=6), _customer(6, 1)),
                    _ev(cm, "U", t + dt.timedelta(minutes=6), _customer(6, 2)),
                    _ev(cm, "D", t + dt.timedelta(minutes=6, seconds=30), _key_only(cm, 7)),
                    # an exact duplicate event (DMS task restart re-sends it)
                    dup8,
                    dup8,
                    # delete of a key that never existed
                    _ev(cm, "D", t + dt.timedelta(minutes=8), _key_only(cm, 999)),
                    # delete then re-insert of one key, in one file
                    _ev(cm, "D", t + dt.timedelta(minutes=9), _key_only(cm, 9)),
                    _ev(cm, "I", t + dt.timedelta(minutes=10), _customer(9, 5)),
                ],
            ),
            RawFile(
                ca,
                "20261102-091500000.parquet",
                [
                    _ev(ca, "I", t, _address(21)),
                    _ev(ca, "I", t + dt.timedelta(minutes=1), _address(22)),
                    _ev(ca, "U", t + dt.timedelta(minutes=3), _address(3, 1)),
                    _ev(ca, "U", t + dt.timedelta(minutes=6), _address(6, 1)),
                    _ev(ca, "U", t + dt.timedelta(minutes=6), _address(6, 2)),
                    _ev(ca, "D", t + dt.timedelta(minutes=6, seconds=30), _key_only(ca, 7)),
                ],
            ),
        ]
    )

    # Stage 3: a normal file, and a late file with OLDER changes, named before it.
    t3 = _at(3, 10, 0)
    stages.append(
        [
            RawFile(
                cm,
                "20261103-101000000.parquet",
                [
                    _ev(cm, "U", t3, _customer(11, 1)),
                    _ev(cm, "D", t3 + dt.timedelta(minutes=1), _key_only(cm, 10)),
                    _ev(cm, "U", t3 + dt.timedelta(minutes=2), _customer(12, 1)),
                    Event(cm, dup8.op, dup8.commit_ts, dict(dup8.row)),  # re-delivered duplicate
                ],
            ),
            RawFile(
                cm,
                "20261102-093000000.parquet",
                [
                    # committed on day 2 between the stage-2 changes, delivered only now
                    _ev(cm, "U", t + dt.timedelta(minutes=2, seconds=45), _customer(5, 9)),  # older than 5's v3
                    _ev(cm, "U", t + dt.timedelta(minutes=6, seconds=10), _customer(7, 9)),  # older than 7's delete
                    _ev(cm, "D", t + dt.timedelta(minutes=1, seconds=30), _key_only(cm, 3)),  # older than 3's update
                    _ev(cm, "U", t + dt.timedelta(minutes=11), _customer(13, 1)),  # late but the newest for 13
                ],
            ),
            RawFile(
                ca,
                "20261103-101000000.parquet",
                [
                    _ev(ca, "U", t3, _address(11, 1)),
                    _ev(ca, "D", t3 + dt.timedelta(minutes=1), _key_only(ca, 10)),
                    _ev(ca, "D", t3 + dt.timedelta(minutes=2), _key_only(ca, 998)),
                    _ev(ca, "I", t3 + dt.timedelta(minutes=3), _address(23)),
                ],
            ),
        ]
    )

    # Stage 4: re-insert of a key deleted in an earlier batch, more changes.
    t4 = _at(4, 11, 0)
    stages.append(
        [
            RawFile(
                cm,
                "20261104-110500000.parquet",
                [
                    _ev(cm, "I", t4, _customer(10, 7)),
                    _ev(cm, "I", t4 + dt.timedelta(minutes=1), _customer(23)),
                    _ev(cm, "U", t4 + dt.timedelta(minutes=2), _customer(21, 1)),
                    _ev(cm, "D", t4 + dt.timedelta(minutes=3), _key_only(cm, 22)),
                    _ev(cm, "U", t4 + dt.timedelta(minutes=4), _customer(1, 1)),
                ],
            ),
            RawFile(
                ca,
                "20261104-110500000.parquet",
                [
                    _ev(ca, "I", t4, _address(10, 7)),
                    _ev(ca, "U", t4 + dt.timedelta(minutes=2), _address(21, 1)),
                    _ev(ca, "D", t4 + dt.timedelta(minutes=3), _key_only(ca, 22)),
                    _ev(ca, "U", t4 + dt.timedelta(minutes=4), _address(1, 1)),
                ],
            ),
        ]
    )
    _assign_sequences(stages)
    return stages


def _assign_sequences(stages: list[list[RawFile]]) -> None:
    """AR_H_CHANGE_SEQ: commit timestamp digits + a counter, strictly increasing in commit order.
    Events sharing a commit time keep their order of appearance; a re-delivered duplicate keeps
    the sequence of its first delivery."""
    cdc = [ev for stage in stages for f in stage for ev in f.events if ev.op is not None]
    seqs: dict[tuple, str] = {}
    counter = itertools.count(1)
    for ev in sorted(cdc, key=lambda e: e.commit_ts):  # stable: ties keep file order
        identity = (ev.table, ev.op, ev.commit_ts, tuple(ev.row.items()))
        if identity not in seqs:
            seqs[identity] = clock.at(ev.commit_ts).strftime("%Y%m%d%H%M%S") + f"{next(counter):021d}"
        ev.seq = seqs[identity]


def as_written(row: dict) -> dict:
    """A source row as written: its timestamp columns (row_audit_ts) on the demo's clock, if on."""
    return {name: clock.at(value) if isinstance(value, dt.datetime) else value for name, value in row.items()}


def _table(f: RawFile) -> pa.Table:
    columns = TABLES[f.table]
    full_load = all(ev.op is None for ev in f.events)
    arrays: dict[str, pa.Array] = {}
    if not full_load:
        arrays["Op"] = pa.array([ev.op for ev in f.events], pa.string())
    arrays["last_update_time"] = pa.array([clock.at(ev.commit_ts) for ev in f.events], TIMESTAMP)
    for name, typ in columns.items():
        arrays[name] = pa.array([as_written(ev.row)[name] for ev in f.events], typ)
    if not full_load:
        arrays["AR_H_CHANGE_SEQ"] = pa.array([ev.seq for ev in f.events], pa.string())
    return pa.table(arrays)


def write_stage(landing_root: Path, stage: int) -> list[Path]:
    """Write stage `stage` (1-based) of the sample under `<landing_root>/dms/crm/<table>/`."""
    if not 1 <= stage <= STAGES:
        raise ValueError(f"stage must be 1..{STAGES}, got {stage}")
    written = []
    for f in _stage_files()[stage - 1]:
        folder = Path(landing_root) / "dms" / SCHEMA / f.table
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / clock.dms_file_name(f.name)
        pq.write_table(_table(f), path, compression="snappy")
        written.append(path)
    return written
