"""The pipeline once, as `make run` (and a scheduler) calls it:

1. `dbt parse`: the manifest tells which tables are CDC tables and where their raw files are;
2. the pipeline state tables are created (on `local`, this opens the process's Spark session);
3. the tables with nothing new are found (`idle_models`); the schema-evolution hook evolves every
   other current-state Iceberg table it can, through the dbt
   adapter of the same target (python_hooks/warehouse.py), so this works on every target;
4. `dbt build` (models, snapshots, tests in DAG order), without the tables the hook refused and
   without the current-state models that have nothing to apply (`idle_models`: every raw file of
   their folder is in their ledger), so a run with nothing new reads no raw file and commits nothing;
5. the batch log gets a row for each table the hooks refused (the merge writes the others'),
   and the run ends with a short table, one line per current-state table: rows now, what this run
   inserted, updated, deleted, ignored and refused, and the lag (python_hooks/status.py);
6. exit status: non-zero if dbt failed or any change was refused; the last lines say what was
   refused or failed and what to do (`run_summary`).

dbt's own lines (one per model, snapshot and test) go to logs/dbt.log; `CDC_VERBOSE=1` (or
`run --verbose`) shows them too. Without it, one progress line per current-state table.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from python_hooks import env
from python_hooks.warehouse import Warehouse, state_dir

log = logging.getLogger(__name__)


def pending_files(warehouse: Warehouse, tables) -> dict[str, int]:
    """model -> how many raw files its folder lists that its ledger does not: the files waiting.
    One query over the folders' listings (the binaryFile tables staging made, macros/cdc/landing.sql)
    and the ledger; no raw file is read. Only models whose table and listing table exist."""
    from python_hooks.schema_plan import quote_ident, sql_string

    meta = warehouse.meta_schema
    known = [
        t for t in tables if warehouse.table_exists(t.schema, t.identifier) and warehouse.table_exists(meta, t.probe)
    ]
    if not known or not warehouse.table_exists(meta, "cdc_file_ledger"):
        return {}
    parts = []
    for table in known:
        probe = f"{quote_ident(meta)}.{quote_ident(table.probe)}"
        warehouse.execute(f"refresh table {probe}")
        parts.append(
            f"select {sql_string(table.model)} as model, count(*) as pending"
            f" from (select regexp_extract(path, '[^/]*$', 0) as file_name from {probe}"
            f" where path like '%.parquet' and not regexp(path, '/[._][^/]*$')) as listing"
            f" left anti join (select file_name from {quote_ident(meta)}.cdc_file_ledger"
            f" where model_name = {sql_string(table.identifier)}) as ledger"
            f" on listing.file_name = ledger.file_name"
        )
    return {model: int(pending) for model, pending in warehouse.query(" union all ".join(parts))}


def idle_models(warehouse: Warehouse, tables) -> set[str]:
    """The current-state models (and their staging models) with nothing to apply: the table exists
    and every raw file its folder lists is in its ledger (`pending_files`). A model whose listing
    table does not exist yet is not idle."""
    pending = pending_files(warehouse, tables)
    idle = set()
    for table in tables:
        if pending.get(table.model, 1) == 0:
            idle.update({table.model, table.staging_model})
    return idle


def _size(path) -> int:
    try:
        return path.stat().st_size
    except OSError:  # gone since the listing
        return -1


def empty_files(tables) -> list[tuple]:
    """(table, path) for each raw file of 0 bytes in a local landing folder. Spark's listing skips
    them, so without this check such a file would wait unseen, and unreported, for ever."""
    from python_hooks.evolve import landing_files

    found = []
    for table in tables:
        if table.folder.is_dir():
            found += [(table, path) for path in sorted(landing_files(table.folder)) if _size(path) == 0]
    return found


@dataclass
class Hooks:
    """What the hooks found: `blocked` models dbt must not build (refused), `idle` ones with nothing
    to apply, and, per refused current-state model, its problems (`refusals`)."""

    ok: bool
    problems: list[str]
    blocked: set[str] = field(default_factory=set)
    idle: set[str] = field(default_factory=set)
    manifest: object = None
    tables: list = field(default_factory=list)
    refusals: dict[str, list[str]] = field(default_factory=dict)
    started_at: dt.datetime | None = None


def run_hooks(runner, common_args: Sequence[str] = (), quiet: bool = False) -> Hooks:
    """Parse, create the state tables, evolve, find the idle tables. `common_args` go to every dbt
    command and say which target the hooks use (--target); `quiet`: dbt's lines to its log file only."""
    from python_hooks.evolve import cdc_tables, evolve

    started_at = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    flags = ["--quiet"] if quiet else []
    parsed = runner.invoke(["parse", *flags, *common_args])
    if not parsed.success:
        return Hooks(False, ["dbt parse failed: see the errors above"])
    started = runner.invoke(["run-operation", "cdc_create_meta_tables", *flags, *common_args])
    if not started.success:
        return Hooks(False, ["could not connect to the warehouse / create the pipeline state tables"])
    with Warehouse.open(common_args) as warehouse:
        log.debug(
            "target %s, schema %s, landing %s", warehouse.target, warehouse.schema, os.environ.get("CDC_LANDING_ROOT")
        )
        tables = cdc_tables(parsed.result)
        idle = idle_models(warehouse, tables)
        result = evolve(warehouse, parsed.result, state_dir(), skip=idle)
    for table, path in empty_files(tables):
        result.problems.append(
            f"{table.model} (source {table.source}): raw file {path} is empty (0 bytes): an upload still in"
            " progress, or one that failed. Spark skips such a file, so it would never be applied: replace it"
            " with the complete file under the same name, or delete it. The table was not changed."
        )
        result.blocked_models.update({table.staging_model, table.model})
    for change in result.applied:  # each ALTER was printed as it ran; schema_evolution_log records it
        log.debug(
            "schema evolution: %s.%s %s %s -> %s",
            change.table,
            change.column,
            change.action,
            change.old_type or "-",
            change.new_type,
        )
    if idle:
        quiet_models = sorted(t.model for t in tables if t.model in idle)
        log.info("nothing new for %s: not built this run", ", ".join(quiet_models))
    refusals = {
        t.model: [p for p in result.problems if t.model in p] for t in tables if t.model in result.blocked_models
    }
    return Hooks(result.ok, result.problems, result.blocked_models, idle, parsed.result, tables, refusals, started_at)


def log_refusals(warehouse: Warehouse, hooks: Hooks, run_id: str) -> None:
    """A cdc_batch_log row (status 'refused') for each current-state table the hooks refused: dbt did
    not build it, so its merge wrote none. files: those waiting; files_refused: those the refusal
    names (at least one)."""
    from python_hooks.evolve import landing_files
    from python_hooks.schema_plan import quote_ident, sql_string

    if not hooks.refusals or not warehouse.table_exists(warehouse.meta_schema, "cdc_batch_log"):
        return
    waiting = pending_files(warehouse, hooks.tables)
    values = []
    for table in hooks.tables:
        problems = hooks.refusals.get(table.model)
        if problems is None:
            continue
        names = {p.name for p in landing_files(table.folder)} if table.folder.is_dir() else set()
        named = sum(any(name in problem for problem in problems) for name in names)
        values.append(
            f"({sql_string(run_id)}, {sql_string(table.identifier)}, 'refused', cast(null as string),"
            f" cast('{hooks.started_at:%Y-%m-%d %H:%M:%S.%f}' as timestamp), current_timestamp(),"
            f" cast(null as double), {waiting.get(table.model, named)}, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,"
            f" {max(1, named)}, {sql_string(' '.join(problems))}, cast(null as timestamp),"
            " cast(null as double), cast(null as bigint))"
        )
    if values:
        relation = f"{quote_ident(warehouse.meta_schema)}.cdc_batch_log"
        warehouse.execute(
            f"insert into {relation} select run_id, model_name, status, build_mode, started_at, finished_at,"
            " (unix_micros(finished_at) - unix_micros(started_at)) / 1e6, files, change_events, rows_inserted,"
            " rows_updated, rows_deleted, ignored_older, ignored_redelivered, ignored_tombstoned,"
            " ignored_truncated, superseded, deletes_without_row, truncates, files_refused, refusal,"
            " newest_commit_at, lag_seconds, snapshot_id"
            f" from values {', '.join(values)} as refused(run_id, model_name, status, build_mode, started_at,"
            " finished_at, seconds, files, change_events, rows_inserted, rows_updated, rows_deleted,"
            " ignored_older, ignored_redelivered, ignored_tombstoned, ignored_truncated, superseded,"
            " deletes_without_row, truncates, files_refused, refusal, newest_commit_at, lag_seconds, snapshot_id)"
        )


class Progress:
    """A dbtRunner callback: one line when a current-state table's batch is done, the project's own
    `cdc: ...` log lines, and the count of the other nodes and of the tests, while dbt's own lines
    go to its log file."""

    def __init__(self, stream=None) -> None:
        self.stream = stream or sys.stdout
        self.tables: set[str] = set()
        self.reset()

    def reset(self) -> None:
        self.done = 0
        self.others = 0
        self.tests: dict[str, int] = {}

    def __call__(self, event) -> None:
        name = event.info.name
        if name == "JinjaLogInfo" and str(getattr(event.data, "msg", "")).startswith("cdc: "):
            # the project's own notes (a branch dropped, a pause or kill point): shown even when quiet
            print(f"  {event.data.msg}", file=self.stream, flush=True)
            return
        if name not in ("LogModelResult", "LogSnapshotResult", "LogTestResult", "LogSeedResult"):
            return
        data = event.data
        node = getattr(data, "node_info", None)
        node_name = getattr(node, "node_name", "") if node else ""
        status = str(getattr(data, "status", "")).lower()
        if name == "LogTestResult":
            self.tests[status] = self.tests.get(status, 0) + 1
        elif node_name in self.tables:
            self.done += 1
            seconds = getattr(data, "execution_time", 0.0)
            print(
                f"  {node_name}: {'applied' if status in ('success', 'ok') else status} ({seconds:.1f} s)",
                file=self.stream,
                flush=True,
            )
        else:
            self.others += 1

    def closing(self) -> str:
        tests = ", ".join(f"{n} {status}" for status, n in sorted(self.tests.items())) or "none"
        return f"  {self.others} other model(s) and snapshot(s) built; tests: {tests}"


def make_runner(progress: bool = True):
    """The dbtRunner of `make run` / `make demo`: with the fault-injection callback when
    CDC_KILL_AT is set (python_hooks/faults.py), and the progress lines unless `progress` is false."""
    from dbt.cli.main import dbtRunner

    from python_hooks import faults

    callbacks = [faults.dbt_callback] if faults.enabled() else []
    if progress:
        callbacks.append(Progress())
    return dbtRunner(callbacks=callbacks)


def verbose() -> bool:
    """CDC_VERBOSE=1: dbt's own lines on the console too (they always go to logs/dbt.log)."""
    return os.environ.get("CDC_VERBOSE", "").lower() in ("1", "true", "yes")


# dbt options that concern every command of the run (parse, run-operation, build), not only build.
SHARED_OPTIONS = ("--target", "-t", "--target-path", "--log-path", "--project-dir", "--profiles-dir", "--vars")


def split_shared_options(args: Sequence[str]) -> tuple[list[str], list[str]]:
    """(build-only arguments, options for every dbt command of the run), from `make run`'s arguments."""
    build: list[str] = []
    shared: list[str] = []
    i = 0
    while i < len(args):
        name = args[i].split("=", 1)[0]
        if name in SHARED_OPTIONS:
            takes_value = "=" not in args[i] and i + 1 < len(args)
            shared.extend(args[i : i + 2] if takes_value else args[i : i + 1])
            i += 2 if takes_value else 1
        else:
            build.append(args[i])
            i += 1
    return build, shared


def _progress(runner) -> Progress | None:
    for callback in getattr(runner, "callbacks", None) or []:
        if isinstance(callback, Progress):
            return callback
    return None


def run_pipeline(
    dbt_args: Sequence[str] = (), runner=None, hooks: bool = True, common_args: Sequence[str] = ()
) -> bool:
    """True when every step succeeded. `runner` lets a caller reuse one dbtRunner (one Spark session);
    `common_args` go to every dbt command (e.g. --project-dir, --target-path)."""
    if runner is None:
        runner = make_runner(progress=not verbose())
    dbt_args, shared = split_shared_options(dbt_args)
    common_args = [*common_args, *shared]
    env.announce(env.environ_for(list(common_args)))
    progress = _progress(runner)
    quiet = progress is not None and not verbose()
    found = Hooks(True, [])
    if hooks:
        found = run_hooks(runner, common_args, quiet=quiet)
        if not found.ok and not found.blocked:
            for problem in found.problems:
                log.error(problem)
            return False
    excluded = sorted({f"{model}+" for model in found.blocked} | found.idle)
    exclude = ["--exclude", *excluded] if excluded else []
    if progress is not None:
        progress.reset()
        progress.tables = {t.model for t in found.tables}
        building = len(progress.tables - found.idle - found.blocked)
        idle = len(progress.tables & found.idle)
        print(
            f"dbt build: {building} table(s) with new files, {idle} with nothing new"
            + (f", {len(found.refusals)} refused" if found.refusals else "")
            + (" (dbt's own lines: logs/dbt.log, or CDC_VERBOSE=1)" if quiet else ""),
            flush=True,
        )
    started = time.monotonic()
    # Unit tests check the SQL, not the data: they belong to CI (`make test`), not to every scheduled run.
    result = runner.invoke(
        [
            "build",
            *exclude,
            "--exclude-resource-type",
            "unit_test",
            *(["--quiet"] if quiet else []),
            *dbt_args,
            *common_args,
        ]
    )
    if progress is not None:
        print(f"{progress.closing()} ({time.monotonic() - started:.0f} s)", flush=True)
    if found.refusals:
        from dbt_common.invocation import get_invocation_id

        with Warehouse.open(common_args) as warehouse:
            log_refusals(warehouse, found, get_invocation_id())
    if progress is not None and found.manifest is not None:
        report(found, common_args)
    for line in run_summary(result, found.problems, found.blocked):
        log.error("%s", line)
    return bool(result.success) and found.ok


def report(found: Hooks, common_args: Sequence[str], stream=None) -> list[str]:
    """Prints the run's table: one line per current-state table, from the batch log rows of this
    run (the build's dbt invocation id)."""
    from dbt_common.invocation import get_invocation_id

    from python_hooks import status

    run_id = get_invocation_id()
    try:
        with Warehouse.open(common_args) as warehouse:
            statuses = status.collect(warehouse, found.manifest)
            run_rows = status.log_rows(warehouse, f"run_id = '{run_id}'")
    except Exception as error:  # the table is a report: a failure to read it must not hide the run's result
        log.warning("could not read the batch log for the run's summary: %s", str(error).splitlines()[0])
        return []
    lines = [f"this run ({run_id[:8]}), per current-state table; {status.LOG_TABLE} has the details:"]
    lines += status.run_table(statuses, run_rows)
    for line in lines:
        print(line, file=stream or sys.stdout, flush=True)
    return lines


WHAT_TO_DO = (
    "What to do: fix or remove each raw file named above in its landing folder (or the source change it"
    " reports), then run again: nothing of a refused batch was applied, and the next run applies it whole"
    " (README: Operations)."
)


def _one_line(message: str, most: int = 12) -> list[str]:
    """A dbt error message as its meaningful lines: dbt's 'Compilation Error in model x (path)' header,
    dbt's macro call chain ('> in macro …'), blank lines and a Spark plan or Java stack trace (all in
    logs/dbt.log) left out; at most `most` lines."""
    lines = []
    for line in (line.strip() for line in str(message).splitlines()):
        if line.startswith(("+-", ":", "'", "at ", "== ", "Caused by", "JVM stacktrace")):
            break
        if line and not line.startswith(">") and not re.match(r"^(Compilation|Runtime|Database) Error( in |$)", line):
            lines.append(line)
    if len(lines) > most:
        lines = [*lines[: most - 1], f"... ({len(lines) - most + 1} more lines in logs/dbt.log)"]
    return lines


def run_summary(result, problems: Sequence[str], blocked: set[str]) -> list[str]:
    """The run's last lines, after dbt's own summary: what was refused or failed and what to do; one
    line that all went well otherwise."""
    failed, skipped = [], []
    for node_result in getattr(result.result, "results", None) or []:
        status = str(node_result.status).lower()
        name = node_result.node.name
        if status in ("error", "fail", "runtime error"):
            failed.append((name, _one_line(node_result.message or status)))
        elif status == "skipped" and getattr(node_result.node, "resource_type", "model") != "test":
            skipped.append(name)
    if result.result is None or not hasattr(result.result, "results"):
        failed.append(("dbt build", _one_line(str(result.exception))))
    if not failed and not problems:
        return []
    lines = [f"this run refused or failed {len(failed) + len(problems)} thing(s); every other table was built:"]
    lines += [f"refused: {problem}" for problem in problems]
    if blocked:
        lines.append(f"not built this run: {', '.join(sorted(blocked))}")
    for name, message in failed:
        lines.append(f"failed: {name}: {message[0] if message else 'failed'}")
        lines.extend(f"  {line}" for line in message[1:])
    if skipped:
        lines.append(f"skipped (they depend on the above): {', '.join(sorted(skipped))}")
    lines.append(WHAT_TO_DO)
    return lines
