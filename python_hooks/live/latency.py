"""Latency from commit to visible (issue 28): for each change event the capture landed after its initial
snapshot, the time from its PostgreSQL commit (`source.ts_ms`: Debezium's commit timestamp, milliseconds)
to the moment its table had it (the ledger's `applied_at` of the event's file: written right after the
table's commit, so an upper bound by a fraction of a second). Broken down into

    capture   commit -> the file written to the landing zone (its mtime: the sink's rotate interval)
    wait      file written -> the batch that applied it committed (the wait for the next run + the run)

Snapshot rows (op `r`) are left out: their time is the snapshot's, not a commit's."""

from __future__ import annotations

import datetime as dt
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq

from python_hooks.landing.files import raw_files
from python_hooks.project.sql import quote_ident, sql_string


@dataclass(frozen=True)
class Event:
    """One landed change: when it committed, when its file was written, when its table had it (epoch seconds), and
    that table's model."""

    committed: float
    landed: float
    visible: float
    model: str = ""


def file_commits(path: Path) -> list[float]:
    """Commit times (epoch seconds) of a file's change events, snapshot rows left out."""
    table = pq.read_table(path)
    if "__op" in table.column_names:  # flattened
        ops, ts = table.column("__op"), table.column("__source_ts_ms")
    else:
        ops, ts = table.column("op"), pc.struct_field(table.column("source"), "ts_ms")
    return [t / 1000 for op, t in zip(ops.to_pylist(), ts.to_pylist(), strict=True) if op != "r" and t is not None]


def applied_times(warehouse, meta_schema: str, models: Iterable[str]) -> dict[tuple[str, str], float]:
    """(model, file name) -> when the ledger recorded it (epoch seconds; the session's time zone is UTC)."""
    names = ", ".join(sql_string(model) for model in models)
    rows = warehouse.query(
        f"select model_name, file_name, cast(unix_micros(min(applied_at)) as string)"
        f" from {quote_ident(meta_schema)}.cdc_file_ledger where model_name in ({names}) group by 1, 2"
    )
    return {(model, name): int(micros) / 1e6 for model, name, micros in rows}


def events(folders: Mapping[str, Path], applied: Mapping[tuple[str, str], float]) -> list[Event]:
    """Every change event of the models' landing folders (model -> folder) that a run applied."""
    found = []
    for model, folder in folders.items():
        for file in raw_files(folder, "debezium"):
            visible = applied.get((model, file.name))
            if visible is None:
                continue
            landed = file.mtime_ns / 1e9
            commits = file_commits(Path(file.location.path))
            found.extend(Event(committed, landed, visible, model) for committed in commits)
    return found


def percentile(values: Sequence[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))]


def summary(found: Sequence[Event]) -> list[str]:
    """Lines: p50 / p95 / max of commit -> visible, and of its two parts."""
    if not found:
        return ["latency: no change event applied yet"]
    parts = {
        "commit -> visible": [e.visible - e.committed for e in found],
        "  capture (commit -> file)": [e.landed - e.committed for e in found],
        "  wait + run (file -> visible)": [e.visible - e.landed for e in found],
    }
    lines = [f"latency of {len(found)} change events, seconds:"]
    for name, values in parts.items():
        lines.append(
            f"{name:32s} p50 {percentile(values, 0.5):6.1f}  p95 {percentile(values, 0.95):6.1f}"
            f"  max {max(values):6.1f}  (mean {statistics.fmean(values):.1f})"
        )
    return lines


def after_first_batches(found: Sequence[Event], since: float) -> tuple[float, list[Event]]:
    """(the moment, the events committed from then on) once every table with changes committed from `since` (the
    workload's start) had its first such batch visible: what a loop that has applied a batch to each of its tables
    shows, its JVM's first batches of each shape and the workload's first schema changes behind it; (since, []) when
    no change committed from `since` was applied."""
    first: dict[str, float] = {}
    for event in found:
        if event.committed >= since:
            first[event.model] = min(first.get(event.model, event.visible), event.visible)
    if not first:
        return since, []
    moment = max(first.values())
    return moment, [event for event in found if event.committed >= moment]


def utc(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.timezone.utc).isoformat(timespec="milliseconds")
