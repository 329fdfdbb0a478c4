"""The end of the day, checked: from the warehouse as soak/inspect_warehouse.py read it, the raw files
and the day's record of commands. Each check is a line of the report; the soak fails if one fails.

- every current-state table equals the pure-Python replay of its raw files (oracles/replay_dms.py,
  oracles/replay_debezium.py), compared whole (helpers/tables.py: assert_same_table); the erased subject
  is in the files as they landed and in no table;
- the batch log: each batch (a model's ledger rows of one run) has one row whose counts equal the replay's
  (oracles/replay_counts.py) over the files as that batch read them, and the day's sums per table equal the
  replay's; the one exception is the batch after a killed run that had committed a batch of the table, at
  any table's kill point, since a run records all its batches after its build (docs/ARCHITECTURE.md, "A true
  record of each run": it logs those changes as re-delivered);
- the ledger lists every landed file once per table; no branch is left;
- storage bounded by the retention settings after the last `maintain`: snapshots per table within
  `keep_last` or the time window, metadata files within `metadata_versions`, and every data or delete file
  on disk referred to by a retained snapshot, but for files a killed run wrote and never committed (the
  orphan removal takes them after its safety interval, 3 days);
- run time per run flat: the last hour's median at most SOAK_FLAT_FACTOR times the first hour's;
- the schema change and the erasure happened (schema_evolution_log, erasure_log).
"""

from __future__ import annotations

import datetime as dt
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from helpers.tables import assert_same_table
from oracles import replay_counts, replay_debezium, replay_dms
from soak.commands import Outcome
from soak.producers import KEY, NEW_COLUMN, Table, holders
from soak.settings import Settings, compared, flat

KEEP_LAST, METADATA_VERSIONS, META_DAYS = 10, 20, 7  # dbt_project.yml's cdc_retention; the meta tables' default
APPLIED = ("rows_inserted", "rows_updated", "rows_deleted")
# What became of each change event: the replay's counts (oracles/replay_counts.py) but the file, event and
# truncate totals.
OUTCOMES = tuple(name for name in replay_counts.COUNTS if name not in ("files", "change_events", "truncates"))


@dataclass
class Check:
    name: str
    ok: bool
    detail: str = ""


def utc(seconds: float) -> dt.datetime:
    """A wall-clock time as the naive UTC datetime Spark returns (the profile's session time zone is UTC)."""
    return dt.datetime.fromtimestamp(seconds, dt.timezone.utc).replace(tzinfo=None)


def records(table: dict) -> list[dict]:
    return [dict(zip([c.lower() for c in table["columns"]], row, strict=True)) for row in table["rows"] or []]


def table_rows(table: dict, columns: Sequence[str]) -> dict[tuple, dict]:
    result: dict[tuple, dict] = {}
    for record in records(table):
        key = (record[KEY],)
        if key in result:
            raise AssertionError(f"duplicate key {key}")
        result[key] = {c: record.get(c) for c in columns}
    return result


def replay(table: Table, root: Path) -> dict[tuple, dict]:
    folder = root / table.relative_folder
    if table.producer == "dms":
        return replay_dms.replay(folder, [KEY])
    return replay_debezium.replay_topic(folder, "flat", [KEY])


# ---------------------------------------------------------------- tables


def whole_tables(state: dict, tables: list[Table], work: Path, subject: int | None) -> list[Check]:
    checks = []
    for table in tables:
        relation = f"{state['schema']}_current.{table.model}"
        found = state["tables"].get(relation)
        if found is None:
            checks.append(Check(f"{table.model} equals the replay", False, "the table does not exist"))
            continue
        columns = [c.lower() for c in found["columns"] if not c.lower().startswith("_cdc_")]
        wanted = [*columns, "_cdc_op", "_cdc_ts"]
        expected = {k: {c: row.get(c) for c in wanted} for k, row in replay(table, work / "landing").items()}
        try:
            assert_same_table(table_rows(found, wanted), expected, relation)
            checks.append(
                Check(f"{table.model} equals the replay", True, f"{len(expected)} rows, {len(columns)} columns")
            )
        except AssertionError as error:
            checks.append(Check(f"{table.model} equals the replay", False, str(error)[:1500]))
    if subject is not None:
        for table in holders(tables):
            landed = (subject,) in replay(table, work / "pristine")
            now = (subject,) in replay(table, work / "landing")
            rows = state["tables"].get(f"{state['schema']}_current.{table.model}")
            held = rows is not None and (subject,) in table_rows(rows, [KEY])
            checks.append(
                Check(
                    f"{table.model}: erased subject {subject} gone",
                    not now and not held,
                    f"in the files as landed: {landed}; in the raw files now: {now}; in the table: {held}",
                )
            )
    return checks


def ledger_and_branches(state: dict, tables: list[Table]) -> list[Check]:
    ledger = records(state["tables"][f"{state['schema']}_cdc_meta.cdc_file_ledger"])
    checks = []
    for table in tables:
        names = [row["file_name"] for row in ledger if row["model_name"] == table.model]
        landed = {Path(path).name for path in table.landed}
        twice = sorted({name for name in names if names.count(name) > 1})
        ok = set(names) == landed and not twice
        detail = f"{len(landed)} files landed, {len(set(names))} in the ledger"
        if not ok:
            detail += f"; not applied: {sorted(landed - set(names))[:5]}; twice: {twice[:5]}"
        checks.append(Check(f"{table.model}: every landed file in the ledger once", ok, detail))
    left = {name: t["branches"] for name, t in state["tables"].items() if set(t["branches"]) - {"main"}}
    checks.append(Check("no branch left on any table", not left, str(left)[:500] if left else ""))
    return checks


# ---------------------------------------------------------------- the batch log


@dataclass
class Kill:
    model: str
    point: str
    started: dt.datetime
    ended: dt.datetime


def _batches(ledger: list[dict], model: str) -> list[tuple[str, dt.datetime, set[str]]]:
    """(invocation, applied at, file names) of each batch of `model`, in the order they were applied."""
    batches: dict[str, tuple[dt.datetime, set[str]]] = {}
    for row in ledger:
        if row["model_name"] != model:
            continue
        applied, files = batches.get(row["invocation_id"], (row["applied_at"], set()))
        files.add(row["file_name"])
        batches[row["invocation_id"]] = (min(applied, row["applied_at"]), files)
    return sorted(((inv, applied, files) for inv, (applied, files) in batches.items()), key=lambda b: b[1])


def _as_read(table: Table, work: Path, batches, erased_at: dt.datetime | None) -> Path:
    """The table's files as its batches read them: as landed (pristine/) for a batch applied before the
    erasure rewrote them, as they are now after."""
    folder = work / "as_read" / table.relative_folder
    shutil.rmtree(folder, ignore_errors=True)
    where = {Path(path).name: Path(path) for path in table.landed}
    for _, applied, files in batches:
        root = work / "pristine" if erased_at is None or applied < erased_at else work / "landing"
        for name in files:
            target = work / "as_read" / where[name]
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(root / where[name], target)
    return folder


def batch_log(
    state: dict, tables: list[Table], work: Path, kills: list[Kill], erased_at: dt.datetime | None
) -> tuple[list[Check], dict[str, dict[str, tuple[int, int]]]]:
    """The checks, and per table the day's sums: count -> (logged, replay)."""
    meta = f"{state['schema']}_cdc_meta"
    log = records(state["tables"][f"{meta}.cdc_batch_log"])
    ledger = records(state["tables"][f"{meta}.cdc_file_ledger"])
    checks, sums = [], {}
    for table in tables:
        batches = _batches(ledger, table.model)
        folder = _as_read(table, work, batches, erased_at)
        stage_files = [files for _, _, files in batches]
        if table.producer == "dms":
            expected = replay_counts.dms_counts(folder, [KEY], stage_files)
        else:
            expected = replay_counts.debezium_counts(folder, "flat", [KEY], stage_files)
        rows = [row for row in log if row["model_name"] == table.model]
        invocations = {inv for inv, _, _ in batches}
        problems, shifted = [], 0
        # Every kill counts for every table, not only the one whose point it was: `make run` builds tables
        # side by side and records all their batches once, after the build (python_hooks/commands/accounting.py),
        # so a kill at one table's point also leaves the other tables' committed batches unlogged.
        # A row of a killed run whose ledger rows never came: allowed at a `during_*` point only (the
        # statement finished, the run went on and was killed after logging the batch).
        extra = [row for row in rows if row["run_id"] not in invocations]
        for row in extra:
            killed = any(k.started <= row["started_at"] <= k.ended and k.point.startswith("during_") for k in kills)
            if not killed:
                problems.append(f"a batch log row (run {row['run_id'][:8]}) for a batch the ledger does not have")
        affected = {_first_after(batches, kill.ended) for kill in kills}
        logged_sums = dict.fromkeys(replay_counts.COUNTS, 0)
        for (invocation, _, _), wanted in zip(batches, expected, strict=True):
            mine = [row for row in rows if row["run_id"] == invocation]
            if len(mine) != 1 or mine[0]["status"] != "applied":
                problems.append(f"run {invocation[:8]}: {len(mine)} batch log rows {[r['status'] for r in mine]}")
                continue
            got = {name: int(mine[0][name] or 0) for name in replay_counts.COUNTS}
            for name in replay_counts.COUNTS:
                logged_sums[name] += got[name]
            want = {name: wanted[name] for name in replay_counts.COUNTS}
            if got == want:
                continue
            if invocation in affected and _shift_after_kill(got, want):
                shifted += 1
                continue
            diff = {name: (got[name], want[name]) for name in want if got[name] != want[name]}
            problems.append(f"run {invocation[:8]} (logged, replay): {diff}")
        replay_sums = {name: sum(batch[name] for batch in expected) for name in replay_counts.COUNTS}
        sums[table.model] = {name: (logged_sums[name], replay_sums[name]) for name in replay_counts.COUNTS}
        detail = f"{len(batches)} batches, {replay_sums['change_events']} change events"
        if shifted:
            detail += f"; {shifted} batch(es) after a kill logged its committed changes as re-delivered"
        if problems:
            detail += "; " + "; ".join(problems[:5])
        checks.append(Check(f"{table.model}: batch log equals the replay's counts", not problems, detail))
    return checks, sums


def _first_after(batches, moment: dt.datetime) -> str | None:
    return next((inv for inv, applied, _ in batches if applied > moment), None)


def _shift_after_kill(got: dict, want: dict) -> bool:
    """The recovery's row of a batch the killed run had committed: the same files and events, fewer
    applied (they are in the table already), every event still counted once."""
    same = all(got[name] == want[name] for name in ("files", "change_events", "truncates"))
    applied = sum(got[name] for name in APPLIED) <= sum(want[name] for name in APPLIED)
    whole = sum(got[name] for name in OUTCOMES) + got["truncates"] == got["change_events"]
    return same and applied and whole


# ---------------------------------------------------------------- storage


def _local(path: str) -> Path:
    return Path(path.removeprefix("file:").replace("///", "/", 1) if path.startswith("file:") else path)


def storage(state: dict, settings: Settings, last_maintain: dt.datetime, kills: list[Kill]) -> tuple[list[Check], dict]:
    """The retention's bounds per table; and the figures: (snapshots, files referenced, on disk, left by kills)."""
    checks, figures = [], {}
    windows_of_kills = [(k.started - dt.timedelta(seconds=2), k.ended + dt.timedelta(seconds=2)) for k in kills]

    def during_a_kill(path: Path) -> bool:
        return any(a <= _mtime(path) <= b for a, b in windows_of_kills)

    for name, table in sorted(state["tables"].items()):
        days = settings.retention_days if table["kind"] == "current_state" else META_DAYS
        cutoff = last_maintain - dt.timedelta(days=days)
        recent = sum(1 for _, committed in table["snapshots"] if committed >= cutoff)
        allowed = max(KEEP_LAST, recent)
        location = _local(table["location"])
        metadata = list((location / "metadata").glob("*.metadata.json"))
        on_disk = {p for p in (location / "data").rglob("*") if p.is_file() and not p.name.startswith(".")}
        referenced = {_local(path) for path in table["files"]}
        unreferenced = on_disk - referenced
        by_kills = {p for p in unreferenced if during_a_kill(p)}
        leaked = unreferenced - by_kills
        # A commit cut by a kill may have written its metadata file without making it current (another thread's
        # table, or the killed statement's): an orphan like a data file, removed after the orphan interval. Metadata
        # files written while a killed run ran are not counted against the bound.
        metadata_in_kills = [p for p in metadata if during_a_kill(p)]
        figures[name] = {
            "snapshots": len(table["snapshots"]),
            "allowed": allowed,
            "metadata_files": len(metadata),
            "files_referenced": len(referenced),
            "files_on_disk": len(on_disk),
            "left_by_kills": len(by_kills),
        }
        bounded = len(metadata) - len(metadata_in_kills) <= METADATA_VERSIONS + 1
        ok = len(table["snapshots"]) <= allowed and bounded and not leaked
        detail = (
            f"{len(table['snapshots'])} snapshots (allowed {allowed}), {len(metadata)} metadata files "
            f"({len(metadata_in_kills)} written while a killed run ran, at most {METADATA_VERSIONS + 1} others), "
            f"{len(on_disk)} data/delete files on disk, {len(referenced)} referenced, {len(by_kills)} left by kills"
        )
        if leaked:
            detail += f"; unreferenced: {sorted(p.name for p in leaked)[:5]}"
        checks.append(Check(f"{name}: storage within the retention", ok, detail))
    return checks, figures


def _mtime(path: Path) -> dt.datetime:
    return utc(path.stat().st_mtime)


# ---------------------------------------------------------------- time, schema change, erasure, commands


def run_times(outcomes: list[Outcome], settings: Settings) -> tuple[Check, dict]:
    runs = [o for o in outcomes if o.kind == "run" and o.number > 1 and o.ok and not o.recovery]
    early, late = compared([o.minute for o in runs], settings)
    first = [o.seconds for o in runs if o.minute in early]
    last = [o.seconds for o in runs if o.minute in late]
    a, b, ok = flat(first, last, settings.flat_factor)
    span = (f"minutes {early[0]}-{early[-1]}", f"minutes {late[0]}-{late[-1]}") if runs else ("-", "-")
    figures = {"first": a, "last": b, "runs": len(first), "first_span": span[0], "last_span": span[1]}
    detail = (
        f"median of the first {len(first)} runs that count ({span[0]}): {a:.1f} s; of the last {len(last)} "
        f"({span[1]}): {b:.1f} s; at most {settings.flat_factor} x (run 1, killed runs and recoveries left out)"
    )
    if set(early) & set(late):  # a day too short (or with too many kills) to hold two sets of runs
        ok, detail = False, f"too few runs that count for a verdict ({len(runs)}): lengthen SOAK_MINUTES; " + detail
    return Check("run time per run flat over the day", ok, detail), figures


def events(state: dict, tables: list[Table]) -> list[Check]:
    meta = f"{state['schema']}_cdc_meta"
    evolution = records(state["tables"][f"{meta}.schema_evolution_log"])
    erasures = records(state["tables"][f"{meta}.erasure_log"])
    first = tables[0]
    added = [row for row in evolution if str(row.get("column_name", "")).lower() == NEW_COLUMN]
    columns = [c.lower() for c in state["tables"][f"{state['schema']}_current.{first.model}"]["columns"]]
    return [
        Check(
            f"schema change: {first.model} gained {NEW_COLUMN}",
            bool(added) and NEW_COLUMN in columns,
            f"schema_evolution_log rows for it: {len(added)}",
        ),
        Check("the erasure is logged", len(erasures) >= 1, f"erasure_log rows: {len(erasures)}"),
    ]


def commands(outcomes: list[Outcome]) -> Check:
    failed = [o for o in outcomes if not o.ok and not o.killed]
    unreached = [o for o in outcomes if o.kill_at and not o.killed]
    detail = f"{len(outcomes)} commands"
    if failed:
        detail += "; failed: " + ", ".join(f"{o.kind} {o.number or ''} at minute {o.minute} ({o.log})" for o in failed)
    if unreached:
        detail += f"; {len(unreached)} kill point(s) not reached (the run finished): " + ", ".join(
            f"run {o.number} {o.kill_at}" for o in unreached
        )
    return Check("every command succeeded but the killed runs", not failed, detail)
