"""Independent oracle for the batch log (cdc_batch_log): what each batch of raw files does to a
current-state table, counted in pure Python from the raw files and the batches they were landed in.

The rules, from docs/ARCHITECTURE.md's contract (not from the pipeline's SQL): a batch applies the
last change of each key; a change applies only if newer than the key's row; the same event again
(same position, or same time and content as the row) changes nothing; a delete leaves a tombstone
that a later, older change of the key cannot pass; a truncate removes every row older than it and
every older change. Each event of a batch is counted once, by what became of it:

    truncates            a truncate event (its rows count in rows_deleted)
    ignored_redelivered  a copy of a newer-ranked event of the batch (same key, operation, time,
                         content), or the key's last change equal to the row's own event
    superseded           a newer change of the same key is in the batch
    ignored_truncated    older than a truncate
    ignored_tombstoned   older than the key's delete recorded by an earlier batch
    ignored_older        older than the key's row
    deletes_without_row  a delete of a key with no row
    rows_inserted / rows_updated / rows_deleted
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from oracles import replay_debezium, replay_dms

COUNTS = (
    "files",
    "change_events",
    "rows_inserted",
    "rows_updated",
    "rows_deleted",
    "ignored_older",
    "ignored_redelivered",
    "ignored_tombstoned",
    "ignored_truncated",
    "superseded",
    "deletes_without_row",
    "truncates",
)


@dataclass(frozen=True)
class Change:
    key: tuple | None  # None for a truncate
    op: str  # I, U, D or T
    order: tuple  # the commit order: (commit time, position at the source)
    ts: dt.datetime
    content: tuple  # the business columns, for "the same event again"
    file: str


def _newer(a: tuple, b: tuple | None) -> bool:
    return b is None or a > b


def batch_counts(batches: Iterable[Sequence[Change]]) -> list[dict]:
    """One dict of COUNTS (plus newest_commit_at and rows) per batch, applied in order."""
    rows: dict[tuple, Change] = {}
    tombstones: dict[tuple, tuple] = {}
    truncated_at: tuple | None = None
    result = []
    for batch in batches:
        counts = dict.fromkeys(COUNTS, 0)
        counts["files"] = len({c.file for c in batch})
        counts["change_events"] = len(batch)
        counts["newest_commit_at"] = max((c.ts for c in batch), default=None)
        truncates = [c for c in batch if c.op == "T"]
        counts["truncates"] = len(truncates)
        if truncates:
            newest = max(c.order for c in truncates)
            truncated_at = max(truncated_at, newest) if truncated_at else newest
            gone = [k for k, row in rows.items() if not _newer(row.order, truncated_at)]
            for k in gone:
                del rows[k]
            counts["rows_deleted"] += len(gone)
        by_key: dict[tuple, list[Change]] = {}
        for change in batch:
            if change.op != "T":
                by_key.setdefault(change.key, []).append(change)
        for key, changes in by_key.items():
            ranked = sorted(changes, key=lambda c: (c.order, c.file), reverse=True)
            for i, change in enumerate(ranked[1:], start=1):
                copy = any((c.op, c.ts, c.content) == (change.op, change.ts, change.content) for c in ranked[:i])
                counts["ignored_redelivered" if copy else "superseded"] += 1
            last = ranked[0]
            if truncated_at is not None and not _newer(last.order, truncated_at):
                counts["ignored_truncated"] += 1
                continue
            if last.op != "D" and key in tombstones and not _newer(last.order, tombstones[key]):
                counts["ignored_tombstoned"] += 1
                continue
            if last.op == "D":
                tombstones[key] = max(tombstones.get(key, last.order), last.order)
            row = rows.get(key)
            if row is None:
                if last.op == "D":
                    counts["deletes_without_row"] += 1
                else:
                    counts["rows_inserted"] += 1
                    rows[key] = last
            elif not _newer(last.order, row.order):
                counts["ignored_redelivered" if last.order == row.order else "ignored_older"] += 1
            elif (last.op, last.ts, last.content) == (row.op, row.ts, row.content):
                counts["ignored_redelivered"] += 1
            elif last.op == "D":
                counts["rows_deleted"] += 1
                del rows[key]
            else:
                counts["rows_updated"] += 1
                rows[key] = last
        counts["rows"] = len(rows)
        result.append(counts)
    return result


def _batches(changes: list[Change], stage_files: Sequence[set[str]]) -> list[list[Change]]:
    return [[c for c in changes if c.file in files] for files in stage_files]


def dms_counts(folder: Path, key: Sequence[str], stage_files: Sequence[set[str]]) -> list[dict]:
    """The counts of each stage's batch of a DMS table folder; `stage_files` the file names each
    stage landed."""
    changes = []
    for event in replay_dms.read_events(folder):
        row = event["row"]
        # A full-load row is positioned by its file and row; a CDC change by AR_H_CHANGE_SEQ.
        position = (0, event["file"], event["position"]) if event["full_load"] else (1, event["seq"])
        changes.append(
            Change(
                key=tuple(row[c] for c in key),
                op=event["op"],
                order=(event["ts"], *position),
                ts=event["ts"],
                content=tuple(sorted(row.items())),
                file=event["file"],
            )
        )
    return batch_counts(_batches(changes, stage_files))


def debezium_counts(topic_dir: Path, shape: str, key: Sequence[str], stage_files: Sequence[set[str]]) -> list[dict]:
    """The counts of each stage's batch of a Debezium topic folder (flat or envelope)."""
    changes = []
    for event in replay_debezium.read_events(topic_dir):
        record = event["record"]
        if shape == "envelope":
            op = record["op"]
            image = record["before"] if op == "d" else record["after"]
            ts_ms = record["source"]["ts_ms"]
            position = (record["source"]["lsn"],)
        else:
            op = record["__op"]
            image = {name: value for name, value in record.items() if not name.startswith("__")}
            ts_ms = record["__source_ts_ms"]
            position = (event["partition"], event["offset"])
        ts = replay_debezium._utc(ts_ms).replace(tzinfo=None)
        changes.append(
            Change(
                key=None if op == "t" else tuple(image[c] for c in key),
                op={"r": "I", "c": "I", "u": "U", "d": "D", "t": "T"}[op],
                order=(ts, *position),
                ts=ts,
                content=() if image is None else tuple(sorted(image.items())),
                file=event["file"],
            )
        )
    return batch_counts(_batches(changes, stage_files))
