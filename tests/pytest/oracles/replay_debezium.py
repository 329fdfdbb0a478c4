"""Independent oracle: the current state of a Debezium topic, replayed in pure Python from the
Parquet files the Confluent S3 sink wrote.

Written from the rules in ../shared/CDC_FORMATS.md, not from the generator or the pipeline's SQL:

- every file `partition=<p>/<topic>+<p>+<start offset>.snappy.parquet`; a row's offset is the
  start offset plus its index in the file;
- envelope: events apply in `source.lsn` order; a delete takes its key from `before`; a truncate
  removes every row whose last applied change is older (smaller lsn) than it; an event whose
  (lsn, key) was already applied is a re-delivery and is skipped;
- flat: events apply in (`__source_ts_ms`, partition, offset) order; an event whose whole content
  was already applied is a re-delivery and is skipped;
- r and c insert, u upserts, d removes the key (a missing key is no error).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from pathlib import Path

import pyarrow.parquet as pq

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
CDC_OP = {"r": "I", "c": "I", "u": "U"}


def read_events(topic_dir: Path) -> list[dict]:
    """Every record of the topic with its partition, offset and file name, in no particular order."""
    events = []
    for path in sorted(Path(topic_dir).glob("partition=*/*.parquet")):
        partition = int(path.parent.name.split("=", 1)[1])
        start = int(path.name.rsplit("+", 1)[1].split(".", 1)[0])
        # ParquetFile reads the file alone: no `partition` column from the hive-style folder name.
        for index, record in enumerate(pq.ParquetFile(path).read().to_pylist()):
            events.append({"partition": partition, "offset": start + index, "file": path.name, "record": record})
    return events


def _utc(ms: int) -> dt.datetime:
    return EPOCH + dt.timedelta(milliseconds=ms)


def _replay_envelope(events: list[dict], key: Sequence[str]) -> dict[tuple, dict]:
    ordered = sorted(events, key=lambda e: (e["record"]["source"]["lsn"], e["partition"], e["offset"]))
    state: dict[tuple, dict] = {}
    changed_at: dict[tuple, int] = {}  # lsn of each live row's last applied change
    applied: set[tuple] = set()
    for event in ordered:
        record = event["record"]
        lsn = record["source"]["lsn"]
        op = record["op"]
        image = record["after"] if op in CDC_OP else record["before"]
        k = None if image is None else tuple(image[c] for c in key)
        if (lsn, k) in applied:
            continue
        applied.add((lsn, k))
        if op == "t":
            for gone in [k2 for k2, at in changed_at.items() if at < lsn]:
                del state[gone], changed_at[gone]
        elif op == "d":
            state.pop(k, None)
            changed_at.pop(k, None)
        elif op in CDC_OP:
            state[k] = {**image, "_cdc_op": CDC_OP[op], "_cdc_ts": _utc(record["source"]["ts_ms"])}
            changed_at[k] = lsn
        else:
            raise ValueError(f"unknown op {op!r} in {event['file']} offset {event['offset']}")
    return state


def _replay_flat(events: list[dict], key: Sequence[str]) -> dict[tuple, dict]:
    ordered = sorted(events, key=lambda e: (e["record"]["__source_ts_ms"], e["partition"], e["offset"]))
    state: dict[tuple, dict] = {}
    applied: set[tuple] = set()
    for event in ordered:
        record = event["record"]
        content = tuple(sorted(record.items()))
        if content in applied:
            continue
        applied.add(content)
        row = {name: value for name, value in record.items() if not name.startswith("__")}
        k = tuple(row[c] for c in key)
        op = record["__op"]
        if op == "d":
            state.pop(k, None)
        elif op in CDC_OP:
            state[k] = {**row, "_cdc_op": CDC_OP[op], "_cdc_ts": _utc(record["__source_ts_ms"])}
        else:
            raise ValueError(f"unknown op {op!r} in {event['file']} offset {event['offset']}")
    return state


def replay_topic(topic_dir: Path, shape: str, key: Sequence[str]) -> dict[tuple, dict]:
    """key tuple -> business columns + `_cdc_op` ('I'/'U') and `_cdc_ts` (source time, UTC) of
    the change that produced the row. `shape` is 'flat' or 'envelope'."""
    events = read_events(topic_dir)
    if shape == "envelope":
        return _replay_envelope(events, key)
    if shape == "flat":
        return _replay_flat(events, key)
    raise ValueError(f"unknown shape {shape!r}: expected 'flat' or 'envelope'")
