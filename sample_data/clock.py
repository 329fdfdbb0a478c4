"""Sample time, and the demo's clock (CDC_SAMPLE_TIMES=now).

The sample's changes happen on fixed dates, 2026-11-01 to 2026-11-06 UTC ("sample time"): the tests,
the replays and the hard cases are written against them, and that is what every caller gets by
default. `make demo` runs with CDC_SAMPLE_TIMES=now, and then every timestamp the sample modules write
is moved to just before the moment the process first asked for one (the demo's start): DMS
`last_update_time`, `row_audit_ts`, `AR_H_CHANGE_SEQ` and the CDC file names (`<yyyymmdd-hhmmssfff>`),
Debezium `__source_ts_ms`, `ts_ms`, `source.ts_ms` and `order_ts`, and the schema-change stage's
times (sample_data/evolution.py). So `dbt source freshness` after `make demo` reads live sources.

The sample modules keep computing sample time (their constants LOAD_TIME, START, DDL_TIME... are
sample time, so nothing depends on when a module was imported) and pass each value through `at()`
or `ms()` where it is written. Those are the identity unless CDC_SAMPLE_TIMES=now.

A single shift would not do: the sample spans five days, so the sources that only change in stages 1
to 4 would be two days old, past the 24-hour error threshold. Instead the sample timeline is cut into
SCENES, the stretches where something happens (a stage's Debezium changes, a stage's DMS batch, the
schema changes), and the demo plays them back to back, GAP apart. Each scene moves as one block, by
a whole number of seconds: inside a scene every spacing is kept to the millisecond (ties, late
events, several changes in one file, a DMS file named after its changes), the order of all
timestamps across scenes and sources is kept (DMS file names sort as before), and only the idle
hours and days between scenes shrink. Whatever lies before the first scene (`row_audit_ts`, orders
placed before the snapshot) moves with it. The newest timestamp `make demo` writes (DEMO_NEWEST, the
schema-change stage's DMS file name) lands LEAD before the start: the newest commit of every source
is then 6 to 17 minutes before the start, and the full load about 67 minutes. The schema changes
only tests write (evolution.py's other functions, after DEMO_NEWEST) would land up to 75 minutes in
the future.

A sample timestamp outside every scene raises ValueError in demo mode (its order could not be
kept): add a scene. tests/pytest/unit/test_sample_clock.py checks every sample timestamp.
"""

from __future__ import annotations

import bisect
import datetime as dt
import functools
import os

ENV = "CDC_SAMPLE_TIMES"  # unset, "" or "fixed": sample time; "now": the demo's clock
UTC = dt.timezone.utc
EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)


def _t(day: int, hour: int, minute: int) -> dt.datetime:
    return dt.datetime(2026, 11, day, hour, minute, tzinfo=UTC)


# (first, last) sample time of each scene, inclusive, in order; bounds in whole minutes.
SCENES: list[tuple[dt.datetime, dt.datetime]] = [
    (_t(1, 8, 0), _t(1, 8, 1)),  # stage 1: DMS full load, Debezium snapshots (and everything earlier)
    (_t(2, 8, 0), _t(2, 8, 2)),  # stage 2: Debezium changes
    (_t(2, 9, 0), _t(2, 9, 30)),  # stage 2: DMS changes, file 09:15; stage 3's late DMS file (09:30)
    (_t(3, 8, 0), _t(3, 8, 2)),  # stage 3: Debezium changes
    (_t(3, 10, 0), _t(3, 10, 10)),  # stage 3: DMS changes, file 10:10
    (_t(4, 8, 0), _t(4, 8, 2)),  # stage 4: Debezium changes
    (_t(4, 11, 0), _t(4, 11, 5)),  # stage 4: DMS changes, file 11:05
    (_t(6, 9, 0), _t(6, 9, 6)),  # schema changes (evolution.py): the changes of make demo's, and of two tests'
    (_t(6, 9, 15), _t(6, 10, 30)),  # make demo's DMS file (09:15), then the changes and files only tests write
]
GAP = dt.timedelta(minutes=1)  # between two scenes in demo time
DEMO_NEWEST = _t(6, 9, 15)  # the newest timestamp `make demo` writes: evolution.dms_new_types' file name
LEAD = dt.timedelta(minutes=1)  # DEMO_NEWEST lands this long before the demo's start


def _placed() -> list[dt.timedelta]:
    """Each scene's start in demo time, relative to the first scene's."""
    starts, at = [], dt.timedelta(0)
    for first, last in SCENES:
        starts.append(at)
        at += last - first + GAP
    return starts


_STARTS = _placed()
_FIRSTS = [first for first, _ in SCENES]


def enabled() -> bool:
    """True when CDC_SAMPLE_TIMES=now (read at every call: tests switch it)."""
    value = (os.environ.get(ENV) or "fixed").strip().lower()
    if value not in {"fixed", "now"}:
        raise ValueError(f"{ENV}={value!r}: expected 'now' (the demo's clock) or 'fixed' (sample time, the default)")
    return value == "now"


@functools.cache
def started() -> dt.datetime:
    """The moment this process first needed the demo's clock, to the second (cached: every stage
    written by one process uses the same shift, so the data stays consistent)."""
    return dt.datetime.now(UTC).replace(microsecond=0)


def _scene(t: dt.datetime) -> int:
    index = max(bisect.bisect_right(_FIRSTS, t) - 1, 0)  # before the first scene: the first
    if t > SCENES[index][1]:
        raise ValueError(
            f"sample time {t.isoformat()} is outside every scene of sample_data/clock.py, so the demo's "
            "clock cannot keep its order: add a scene for it to SCENES"
        )
    return index


def offset(t: dt.datetime, start: dt.datetime) -> dt.timedelta:
    """How far the demo's clock moves sample time `t` for a demo started at `start`: a whole number
    of seconds, the same for every timestamp of one scene."""
    newest = _scene(DEMO_NEWEST)
    base = start.replace(microsecond=0) - LEAD - (DEMO_NEWEST - SCENES[newest][0] + _STARTS[newest])
    index = _scene(t)
    return base + _STARTS[index] - SCENES[index][0]


def shift(t: dt.datetime) -> dt.timedelta:
    """How far sample time `t` (timezone-aware) is moved when written: zero unless CDC_SAMPLE_TIMES=now."""
    return offset(t, started()) if enabled() else dt.timedelta(0)


def at(t: dt.datetime) -> dt.datetime:
    """Sample time `t` as written (a timezone-aware datetime)."""
    return t + shift(t)


def ms(epoch_ms: int) -> int:
    """Sample time as Debezium's epoch milliseconds, as written."""
    if not enabled():
        return epoch_ms
    return epoch_ms + shift(EPOCH + dt.timedelta(milliseconds=epoch_ms)) // dt.timedelta(milliseconds=1)


def dms_file_name(name: str) -> str:
    """A DMS CDC file name, `<yyyymmdd-hhmmssfff>.parquet` (its write time), as written; other names
    (full-load `LOAD<n>.parquet`) as they are."""
    stem, dot, suffix = name.partition(".")
    try:
        written = dt.datetime.strptime(stem + "000", "%Y%m%d-%H%M%S%f").replace(tzinfo=UTC)
    except ValueError:
        return name
    return at(written).strftime("%Y%m%d-%H%M%S%f")[:-3] + dot + suffix
