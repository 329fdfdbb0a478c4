"""The pipeline once, as `make run` (and a scheduler) calls it:

1. one session (python_hooks/project/session.py): `dbt parse` (the manifest tells which tables are
   CDC tables and where their raw files are), the pipeline state tables created (on `local`, this
   opens the process's Spark session), the warehouse through the dbt adapter of the target;
2. the tables with nothing new are found (landing/pending.py: `idle_models`); every raw file a batch is
   about to read is read whole with pyarrow (`batch_files`, evolution/apply.py: `refused_files`), so that
   a file gone since it was listed, one this user may not read, one whose footer or pages do not decode,
   or one with events the batch's validation refuses (landing/validation.py) is refused in one line
   naming it before anything is changed; then the schema-evolution hook (python_hooks/evolution/)
   evolves every other current-state Iceberg table it can;
3. `dbt build` (models, snapshots, tests in DAG order), without the tables the hook refused and
   without the current-state models that have nothing to apply (`idle_models`: every raw file of
   their folder is in their ledger), so a run with nothing new reads no raw file and commits nothing;
4. the batch log gets a row for each table the hooks refused (the merge writes the others'),
   and the run ends with a short table, one line per current-state table it applied or refused: rows
   now, what this run inserted, updated, deleted, ignored and refused, and the lag of its batch
   (python_hooks/commands/status.py: run_table);
5. exit status: non-zero if dbt failed or any change was refused; the last lines say what was
   refused or failed and what to do (`run_summary`).

dbt's own lines (one per model, snapshot and test) go to logs/dbt.log; `CDC_VERBOSE=1` (or
`run --verbose`) shows them too. Without it, one progress line per current-state table.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

from dbt_common.invocation import get_invocation_id

from python_hooks.commands import accounting, downstream, status
from python_hooks.commands.selection import (
    downstream_nodes,
    downstream_of,
    guaranteed_tests,
    idle_descendants,
    meta_tests,
    selected_nodes,
)
from python_hooks.commands.summary import run_summary
from python_hooks.evolution import seeds, staging_views
from python_hooks.evolution.apply import evolve, refused_files
from python_hooks.evolution.footers import FooterReadError, read_footer, struct_fields
from python_hooks.landing.files import empty_files, is_listed_here, landing_files, raw_files
from python_hooks.landing.pending import (
    PLAN_PARTS_VARIABLE,
    PLAN_VARIABLE,
    STAGING_TEST_FILES_VARIABLE,
    idle_models,
    ledger_cached,
    ledger_relation,
    note_recorded,
    pending,
    pending_files,
    plan_environment,
    plan_parts,
    staging_test_files,
)
from python_hooks.project import dbt_selection, env, faults, iceberg
from python_hooks.project.dbt_args import split_shared_options
from python_hooks.project.meta import (
    BATCH_LOG,
    ERASURE_REGISTER,
    META_READY_VARIABLE,
    RECTIFICATION_REGISTER,
    REGISTERS_EMPTY_VARIABLE,
)
from python_hooks.project.session import Session, SessionError, dbt_runner
from python_hooks.project.sql import quoted_relation, sql_string
from python_hooks.project.storage import StorageError, location
from python_hooks.project.tables import CdcTable, cdc_tables
from python_hooks.project.warehouse import (
    LISTINGS_MAX_CHARS,
    LISTINGS_VARIABLE,
    SCHEMAS_VARIABLE,
    SINGLE_WRITER_VARIABLE,
    Warehouse,
    state_dir,
)

log = logging.getLogger(__name__)

EMBEDDED_THREADS = 4  # `make run`'s dbt threads on the single-writer target (_threads)


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
    plan: dict[str, dict] = field(default_factory=dict)  # landing/pending.py: Pending.plan
    # evolution/staging_views.py: the staging views' fingerprints, and those dbt need not create again
    views: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    unchanged_views: set[str] = field(default_factory=set)
    single_writer: bool = False  # project/warehouse.py: Warehouse.single_writer
    registers_empty: bool = False  # no erasure or rectification was ever recorded
    # the models, snapshots and seeds the caller's selection chooses (commands/selection.py); None: every one
    selected: set[str] | None = None
    schemas: set[str] = field(default_factory=set)  # the schemas the hooks found (Warehouse.existing_schemas)
    # the hooks' `show table extended` rows by schema, still true at their end (Warehouse.listings)
    listings: dict[str, list[list]] = field(default_factory=dict)
    # the raw files the hooks listed per landing folder (single-writer target: no other run lands or applies)
    file_counts: dict[str, int] = field(default_factory=dict)


def run_hooks(
    runner,
    common_args: Sequence[str] = (),
    quiet: bool = False,
    rebuild: bool = False,
    build_args: Sequence[str] = (),
) -> Hooks:
    """Parse, create the state tables, evolve, find the idle tables. `common_args` go to every dbt
    command and say which target the hooks use (--target); `quiet`: dbt's lines to its log file only;
    `rebuild` (--full-refresh): no table is idle, every one is built again from all its files (its ledger
    may name files that were replaced under the same names: a recreated topic's offsets start again).
    `build_args`: the build's own options; with a selection (--select, --exclude, --selector) the hooks
    look only at the current-state tables it chooses (or whose staging model it chooses): the others'
    folders are not listed, their tables not evolved."""
    started_at = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    try:
        check_object_store(env.environ_for(list(common_args)))
        session = Session.start(common_args, runner=runner, quiet=quiet, meta_tables=True)
    except (StorageError, SessionError) as error:
        return Hooks(False, [str(error)])
    with session:
        warehouse = session.warehouse
        log.debug(
            "target %s, schema %s, landing %s", warehouse.target, warehouse.schema, os.environ.get("CDC_LANDING_ROOT")
        )
        every_table = cdc_tables(session.manifest)
        selected = selected_nodes(runner, session.manifest, build_args, common_args)
        tables = [t for t in every_table if selected is None or t.model in selected or t.staging_model in selected]
        unselected = {t.model for t in every_table} - {t.model for t in tables}
        try:
            # each folder listed once for the run: what waits, the batches' files, the schema hook and the
            # check for empty files all read this listing
            listings = {t.identifier: landing_files(t.folder) for t in tables if is_listed_here(t.folder)}
            waiting = pending(warehouse, tables, cache_dir=state_dir(), listings=listings)
        except StorageError as error:  # a landing folder on S3 that cannot be listed: say what to check
            return Hooks(False, [str(error)])
        idle = set() if rebuild else idle_models(tables, waiting)
        # The files each model applies, listed once here, handed to dbt (single-writer target only: on
        # a shared one another run may apply them meanwhile, so each model lists its own at its turn).
        single_writer = warehouse.single_writer
        plan = waiting.plan if single_writer else {}
        # Before anything is changed (a new column first): every file a batch is about to read, read whole,
        # a file Spark could not read or whose events the batch would refuse is refused in words.
        refused, batches, footers, placeholders, one_round = {}, {}, {}, {}, {}
        for table in tables:
            if table.model in idle or not is_listed_here(table.folder):
                continue
            batches[table.model] = batch_files(table, waiting.plan, listings[table.identifier], rebuild)
            problems = refused_files(table, batches[table.model], footers, placeholders, one_round)
            if problems:
                refused[table.model] = problems
        result = evolve(
            warehouse,
            session.manifest,
            state_dir(),
            skip=idle | unselected | set(refused),
            applied=None if rebuild else waiting.applied,
            footers=footers,
            listings=listings,
        )
        for table in tables:
            if table.model in refused:
                result.problems.extend(refused[table.model])
                result.blocked_models.update({table.staging_model, table.model})
        for table in tables:  # what the hooks know of each planned table, so that its batch need not ask again
            entry = plan.get(table.identifier)
            if entry is not None and table.model in result.columns:
                entry["columns"] = result.columns[table.model]
                entry["staging_model"] = table.staging_model
                entry["grouped"] = table.staging_model in result.grouped
                if table.staging_model in result.group_columns:
                    # each file group's raw columns and struct fields: its view and batch reads need not ask Spark
                    entry["group_columns"] = result.group_columns[table.staging_model]
                if not rebuild and placeholders.get(table.model) is False:
                    # no file of the batch (the plan's) holds the source's placeholder: the batch skips the fill
                    entry["no_placeholder"] = True
                elif not rebuild and one_round.get(table.model):
                    # no delete of the batch can change what its fill finds: it fills in one round
                    entry["fill_one_round"] = True
        if plan and not rebuild:  # each planned table's state, for all in one query (its batch need not ask)
            _plan_states(warehouse, tables, plan, result.blocked_models)
        for table in tables:
            if table.model in result.blocked_models or table.model not in batches:
                continue
            files = batches[table.model]
            if files and table.identifier in plan:
                # files whose footers name the same columns in the same order, and the same fields in each struct
                # column: those are the batch's raw columns and struct fields, whatever group of files it reads
                # them in (what Spark infers from one of them; cdc_planned_raw_columns); else the batch asks
                with contextlib.suppress(FooterReadError):  # read whole just before: then the batch asks
                    schemas = [footers.get(str(location(file))) or read_footer(file) for file in files]
                    names = {tuple(schema.names) for schema in schemas}
                    fields = {json.dumps(struct_fields(schema)) for schema in schemas}
                    if len(names) == 1 and len(fields) == 1:
                        plan[table.identifier]["raw_columns"] = list(names.pop())
                        plan[table.identifier]["raw_fields"] = json.loads(fields.pop())
        views, unchanged, registers_empty = {}, set(), False
        if any(t.model not in idle for t in tables):
            registers = staging_views.registers_state(warehouse, (ERASURE_REGISTER, RECTIFICATION_REGISTER))
            # never written: no batch need ask them (macros/cdc/erasure.sql: CDC_REGISTERS_EMPTY); on a shared
            # target an erasure may write one meanwhile, so there each batch reads them
            registers_empty = single_writer and all(value == "None" for value in json.loads(registers or "[]"))
            views, unchanged = _staging_views(
                warehouse, session.manifest, tables, idle, result.staging_inputs, registers
            )
    applied = {} if rebuild else waiting.applied  # a rebuild reads every file again: an empty one is refused
    for table in (t for t in tables if is_listed_here(t.folder)):
        listed = listings[table.identifier]
        empty = empty_file_refusals(table, applied.get(table.identifier, ()), listed)
        if empty:  # one line per file: this one says more than the footer's that evolve gave it
            named = {str(path.location) for path in empty_files(table.folder, listed)}
            result.problems[:] = [p for p in result.problems if not any(n in p for n in named)] + empty
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
    return Hooks(
        result.ok,
        result.problems,
        result.blocked_models,
        idle,
        session.manifest,
        tables,
        refusals,
        started_at,
        plan,
        views,
        unchanged - result.blocked_models,
        single_writer,
        registers_empty,
        selected,
        set(warehouse.existing_schemas),
        warehouse.listings() if single_writer else {},
        # each staging view it builds counts its folder's raw files from this listing (macros/cdc/landing.sql)
        {t.landing.rstrip("/"): len(listings[t.identifier]) for t in tables if t.identifier in listings}
        if single_writer
        else {},
    )


def batch_files(table: CdcTable, plan: Mapping[str, dict], listed: Sequence, rebuild: bool = False) -> list:
    """The raw files the table's batch reads this run: those of the plan (landing/pending.py), else (a
    table not built yet, a rebuild, two files of one name) every raw file of its folder (`listed`: the
    run's listing of it)."""
    entry = plan.get(table.identifier)
    if entry is None or rebuild:
        return raw_files(table.folder, table.producer, listed)
    return [table.folder.join(relative) for _, relative in entry["files"]]


def check_object_store(environ: Mapping[str, str]) -> None:
    """Before Spark starts: the landing root, and on the embedded target the warehouse (its Spark
    writes there with this process's variables), each answer if on S3 (project/storage.py:
    `Location.check`, one request each). Keys refused, an endpoint down or a bucket missing is then one
    StorageError line, and the run has changed nothing."""
    names = ["CDC_LANDING_ROOT", *(["CDC_WAREHOUSE"] if env.is_embedded(environ) else [])]
    for name in names:
        if environ.get(name):
            location(environ[name]).check()


def empty_file_refusals(table: CdcTable, applied: Collection[str] = (), listed: Sequence | None = None) -> list[str]:
    """One refusal per raw file of 0 bytes in the table's folder (landing/files.py: empty_files; `listed`:
    the run's listing of it, else listed now) but those its ledger lists (`applied`: landing/pending.py,
    Pending.applied). An applied file emptied in place since is never read again (the ledger knows a file
    by its name): like any applied file changed in place, it refuses nothing, and the schema hook warns that
    its new content is ignored (evolution/apply.py: inspect_table)."""
    return [
        f"{table.model} (source {table.source}): raw file {path} is empty (0 bytes): an upload still in"
        " progress, or one that failed. Spark skips such a file, so it would never be applied: replace it"
        " with the complete file under the same name, or delete it. The table was not changed."
        for path in empty_files(table.folder, listed)
        if path.name not in applied
    ]


def _staging_views(warehouse: Warehouse, manifest, tables, idle: set[str], inputs: dict[str, str], registers: str):
    """The fingerprints of the staging views of the tables with new files, and which of those views
    are as `make run` last built them (evolution/staging_views.py)."""
    candidates = [t.staging_model for t in tables if t.model not in idle and t.staging_model in inputs]
    if not candidates:
        return {}, set()
    views = staging_views.fingerprints(manifest, candidates, inputs, registers)
    stamped = {}  # one listing per schema (on the embedded target dbt's build then reads it too)
    for schema in {schema for schema, _, _ in views.values()}:
        for name, value in warehouse.listed_property(schema, staging_views.PROPERTY).items():
            stamped[(schema.lower(), name)] = value
    return views, staging_views.unchanged(views, stamped)


# cdc_batch_log's counters (0 in a refused row): what a batch read, did and ignored
_COUNTERS = ("change_events", "rows_", "ignored_", "superseded", "deletes_without_row", "truncates")


def log_refusals(warehouse: Warehouse, hooks: Hooks, run_id: str) -> dict[str, int]:
    """A cdc_batch_log row (status 'refused') for each current-state table the hooks refused: dbt did
    not build it, so its merge wrote none. files: those waiting; files_refused: those the refusal
    names (at least one), returned by model for the run's table. Columns by name, in the table's own
    order (macros/cdc/meta.sql owns them)."""
    meta = warehouse.meta_schema
    types = dict(warehouse.columns(meta, BATCH_LOG) or [])
    columns = list(types)
    if not hooks.refusals or not columns:
        return {}
    refused = {}
    waiting = pending_files(warehouse, hooks.tables)
    rows = []
    for table in hooks.tables:
        problems = hooks.refusals.get(table.model)
        if problems is None:
            continue
        names = {p.name for p in landing_files(table.folder)} if is_listed_here(table.folder) else set()
        named = sum(any(name in problem for problem in problems) for name in names)
        refused[table.model] = max(1, named)
        row = {
            "run_id": sql_string(run_id),
            "model_name": sql_string(table.identifier),
            "status": "'refused'",
            "started_at": f"cast('{hooks.started_at:%Y-%m-%d %H:%M:%S.%f}' as timestamp)",
            "finished_at": "current_timestamp()",
            "files": str(waiting.get(table.model, named)),
            "files_refused": str(max(1, named)),
            "refusal": sql_string(" ".join(problems)),
        }
        # every other column: a count is 0, anything else null
        rows.append(
            [row.get(name, "0" if name.startswith(_COUNTERS) else f"cast(null as {types[name]})") for name in columns]
        )
    if rows:
        values = ", ".join(f"({', '.join(row)})" for row in rows)
        seconds = "(unix_micros(finished_at) - unix_micros(started_at)) / 1e6"
        select = ", ".join(seconds if name == "seconds" else name for name in columns)
        warehouse.execute(
            f"insert into {quoted_relation(meta, BATCH_LOG)} select {select}"
            f" from values {values} as refused({', '.join(columns)})",
            tables_changed=False,
        )
    return refused


class Progress:
    """A dbtRunner callback: one line when a current-state table's batch is done, the project's own
    `cdc: ...` log lines, and the count of the other nodes and of the tests, while dbt's own lines
    go to its log file. dbt calls it from its threads: a line is written whole, in one write."""

    def __init__(self, stream=None) -> None:
        self.stream = stream or sys.stdout
        self.tables: set[str] = set()
        self.lock = threading.Lock()
        self.reset()

    def _say(self, line: str) -> None:
        with self.lock:  # print() writes the text and the newline apart: two threads' lines would interleave
            self.stream.write(line + "\n")
            self.stream.flush()

    def reset(self) -> None:
        self.done = 0
        self.others = 0
        self.tests: dict[str, int] = {}

    def __call__(self, event) -> None:
        name = event.info.name
        if name == "JinjaLogInfo" and str(getattr(event.data, "msg", "")).startswith("cdc: "):
            # the project's own notes (a branch dropped, a pause or kill point): shown even when quiet
            self._say(f"  {event.data.msg}")
            return
        if name not in ("LogModelResult", "LogSnapshotResult", "LogTestResult", "LogSeedResult"):
            return
        data = event.data
        node = getattr(data, "node_info", None)
        node_name = getattr(node, "node_name", "") if node else ""
        status = str(getattr(data, "status", "")).lower()
        line = None
        with self.lock:
            if name == "LogTestResult":
                self.tests[status] = self.tests.get(status, 0) + 1
            elif node_name in self.tables:
                self.done += 1
                seconds = getattr(data, "execution_time", 0.0)
                line = f"  {node_name}: {'applied' if status in ('success', 'ok') else status} ({seconds:.1f} s)"
            else:
                self.others += 1
        if line is not None:  # written once the counts' lock is given back (_say takes it)
            self._say(line)

    def closing(self) -> str:
        tests = ", ".join(f"{n} {status}" for status, n in sorted(self.tests.items())) or "none"
        return f"  {self.others} other model(s) and snapshot(s) built; tests: {tests}"


def make_runner(progress: bool = True, kill_points: bool | None = None):
    """The dbtRunner of `make run` / `make demo`: with the fault-injection callback when CDC_KILL_AT is set
    (python_hooks/project/faults.py) or `kill_points` is true (a process whose commands set it one by one),
    and the progress lines unless `progress` is false."""
    callbacks = [faults.dbt_callback] if (faults.enabled() if kill_points is None else kill_points) else []
    if progress:
        callbacks.append(Progress())
    return dbt_runner(callbacks)


def verbose() -> bool:
    """CDC_VERBOSE=1: dbt's own lines on the console too (they always go to logs/dbt.log)."""
    return os.environ.get("CDC_VERBOSE", "").lower() in ("1", "true", "yes")


def _progress(runner) -> Progress | None:
    for callback in getattr(runner, "callbacks", None) or []:
        if isinstance(callback, Progress):
            return callback
    return None


def run_pipeline(
    dbt_args: Sequence[str] = (),
    runner=None,
    hooks: bool = True,
    common_args: Sequence[str] = (),
    hold_downstream: bool = False,
) -> bool:
    """True when every step succeeded. `runner` lets a caller reuse one dbtRunner (one Spark session);
    `common_args` go to every dbt command (e.g. --project-dir, --target-path); `hold_downstream`: the models
    and snapshots downstream of the current-state tables wait for a later run (commands/downstream.py)."""
    if runner is None:
        runner = make_runner(progress=not verbose())
    dbt_args, shared = split_shared_options(dbt_args)
    common_args = [*common_args, *shared]
    env.announce(env.environ_for(list(common_args)))
    progress = _progress(runner)
    quiet = progress is not None and not verbose()
    found = Hooks(True, [])
    if hooks:
        try:
            found = run_hooks(runner, common_args, quiet=quiet, rebuild=_full_refresh(dbt_args), build_args=dbt_args)
        except StorageError as error:  # S3 failed after the check (a folder listed for empty files): one line
            found = Hooks(False, [str(error)])
        if not found.ok and not found.blocked:
            for problem in found.problems:
                log.error(problem)
            return False
    quiet_nodes, checked, owed, held, debt = set(), set(), set(), set(), None
    seed_prints, same_seeds = {}, set()
    holding = hold_downstream and found.manifest is not None and not _full_refresh(dbt_args)
    if found.manifest is not None:
        # what earlier runs held back is built now (commands/downstream.py), unless this one holds back too
        # by relation: one warehouse's state serves every schema
        debt = downstream.Debt(state_dir(), {f"{t.schema}.{t.identifier}": t.model for t in found.tables})
        owed = debt.owed
        quiet_nodes = idle_descendants(found.manifest, found.tables, found.idle - (set() if holding else owed))
        if holding:
            held = downstream_nodes(found.manifest, found.tables) - quiet_nodes
            quiet_nodes |= held
        if not _full_refresh(dbt_args):  # what each batch checks itself is not checked again (commands/selection.py)
            checked = guaranteed_tests(found.manifest, [t for t in found.tables if t.model not in found.idle])
            checked |= meta_tests(found.manifest)
            if found.single_writer and hasattr(runner, "callbacks"):  # seeds as last loaded (evolution/seeds.py)
                seed_prints = seeds.fingerprints(found.manifest)
                same_seeds = seeds.unchanged(state_dir(), seed_prints)
                checked |= set(seeds.own_tests(found.manifest, same_seeds).values())
    excluded = sorted({f"{model}+" for model in found.blocked} | found.idle | quiet_nodes | checked)
    exclude = ["--exclude", *excluded] if excluded else []
    # Nothing new anywhere (every table idle, none refused; with a selection of the caller's own, every
    # model, snapshot and seed it chooses is idle or downstream of idle tables only): no dbt build.
    if found.selected is None:
        tables = {t.model for t in found.tables}
        nothing_new = bool(found.tables) and tables <= found.idle and (holding or not owed & tables)
    else:
        nothing_new = bool(found.tables) and found.selected <= found.idle | quiet_nodes
    if progress is not None:
        progress.reset()
        progress.tables = {t.model for t in found.tables}
        building = len(progress.tables - found.idle - found.blocked)
        idle = len(progress.tables & found.idle)
        print(
            f"dbt build: {building} table(s) with new files, {idle} with nothing new"
            + (f", {len(found.refusals)} refused" if found.refusals else "")
            + (
                f"; {len(found.unchanged_views)} staging view(s) unchanged, not created again"
                if found.unchanged_views and not _full_refresh(dbt_args)
                else ""
            )
            + (f"; {len(held)} downstream model(s) and snapshot(s) held back (--downstream-every)" if held else "")
            + (" (dbt's own lines: logs/dbt.log, or CDC_VERBOSE=1)" if quiet else ""),
            flush=True,
        )
    applied = {t.model for t in found.tables} - found.idle - found.blocked  # the tables this run applies
    if holding and not nothing_new:  # the debt first: a run killed after its tables committed still leaves it
        debt.keep(downstream.next_owed(owed, applied, held=True, built=False))
    started = time.monotonic()
    # Unit tests check the SQL, not the data: they belong to CI (`make test`), not to every scheduled run.
    # The build takes the manifest the hooks parsed (the project is read once per run); the runner
    # is given back as it was, since a caller may reuse it for another project.
    reuse = found.manifest is not None and hasattr(runner, "manifest")
    given = runner.manifest if reuse else None
    if reuse:
        runner.manifest = found.manifest
    handed: dict[str, str] = {}  # what the hooks hand to the macros, for this build only
    if found.plan:  # the run's plan: the files each model applies, as the hooks listed them (landing/pending.py)
        parts = plan_parts(found.plan)
        handed.update(plan_environment(parts))
        # The staging views' data tests read the plan's files, not the folders' history (staging_tests.sql).
        if not _full_refresh(dbt_args):
            planned = {identifier: entry for part in parts for identifier, entry in part.items()}
            handed[STAGING_TEST_FILES_VARIABLE] = staging_test_files(planned, found.tables)
    # The staging views dbt leaves as they are (evolution/staging_views.py); --full-refresh builds all.
    if found.unchanged_views and not _full_refresh(dbt_args):
        handed[staging_views.UNCHANGED_VARIABLE] = json.dumps(sorted(found.unchanged_views))
    if found.views:  # what each view it builds keeps among its properties
        prints = {name: view[2] for name, view in sorted(found.views.items())}
        handed[staging_views.FINGERPRINTS_VARIABLE] = json.dumps(prints)
        folders = {t.landing.rstrip("/") for t in found.tables if t.staging_model in found.views}
        counts = {folder: n for folder, n in found.file_counts.items() if folder in folders}
        if counts:  # the views count the hooks' listing, not the folder again (cdc_landing_file_count)
            handed[FILE_COUNTS_VARIABLE] = json.dumps(counts)
    if same_seeds:
        handed[seeds.UNCHANGED_VARIABLE] = json.dumps(sorted(same_seeds))
    collector = accounting.Accounting() if hasattr(runner, "callbacks") and found.manifest is not None else None
    if collector is not None:  # the batches' ledger and batch-log rows: once, after the build
        handed[accounting.ACCOUNTING_VARIABLE] = "run"
        spool = _tombstone_spool() if found.single_writer else None
        if spool:
            handed[accounting.TOMBSTONE_SPOOL_VARIABLE] = spool
        runner.callbacks.append(collector)
    if found.manifest is not None:  # the hooks' session made sure every meta table exists
        handed[META_READY_VARIABLE] = "1"
        handed[SINGLE_WRITER_VARIABLE] = "1" if found.single_writer else "0"
        if found.registers_empty:
            handed[REGISTERS_EMPTY_VARIABLE] = "1"
        if found.schemas:  # dbt lists no schema (macros/spark/list_schemas.sql)
            handed[SCHEMAS_VARIABLE] = json.dumps(sorted(found.schemas))
        listed = json.dumps(found.listings) if found.listings and not _full_refresh(dbt_args) else ""
        if listed and len(listed) <= LISTINGS_MAX_CHARS:  # dbt's relation cache from them (list_relations.sql)
            handed[LISTINGS_VARIABLE] = listed
    try:
        if nothing_new:
            from dbt.cli.main import dbtRunnerResult

            result = dbtRunnerResult(success=True)
        else:
            # dbt selects from the names of --exclude by an index (project/dbt_selection.py)
            with env.overridden(handed, clear=HANDED_VARIABLES), dbt_selection.indexed_names():
                result = runner.invoke(
                    [
                        "build",
                        *exclude,
                        "--exclude-resource-type",
                        "unit_test",
                        # dbt lists only the schemas of the nodes it builds (one `show table extended` each),
                        # not every schema of the project
                        "--cache-selected-only",
                        *_threads(found.single_writer and collector is not None, dbt_args),
                        *(["--quiet"] if quiet else []),
                        *dbt_args,
                        *common_args,
                    ]
                )
    finally:
        if reuse:
            runner.manifest = given
        if collector is not None:
            runner.callbacks.remove(collector)
    if not result.success:
        _drop_batch_views()
    recorded = True
    # After the build, one connection: the accounting, the refused tables' rows, the run's table.
    warehouse, unopened = None, None
    if (
        (collector is not None and collector.records)
        or found.refusals
        or (progress is not None and found.manifest is not None)
    ):
        try:
            warehouse = Warehouse.open(common_args)
        except Exception as error:  # said below by what needed it
            unopened = error
    try:
        if collector is not None and collector.records:
            try:
                if warehouse is None:
                    raise unopened
                accounting.record(warehouse, collector.records)
                try:  # upkeep only: the rows are recorded, a failure leaves the partitions and the cache as they are
                    added = accounting.ledger_files(collector.records)
                    ledger = ledger_relation(warehouse)
                    after = accounting.after_record(
                        warehouse, collector.records, ledger_snapshot=bool(added) and ledger_cached(state_dir(), ledger)
                    )
                    if after.ledger is not None and added:
                        note_recorded(state_dir(), ledger, *after.ledger, added)
                    accounting.compact_meta(warehouse, collector.records, after.partitions)
                except Exception as error:
                    log.warning(
                        "the meta tables' compaction after this run failed (they stay correct): %s",
                        (str(error).strip().splitlines() or [type(error).__name__])[0],
                    )
            except Exception as error:  # the warehouse went away after the build: said in one line, the run fails
                recorded = False
                log.error(
                    "the batch log and the ledger could not record this run's %d batch(es): %s. Their tables"
                    " are applied; the next run reads their files again, which changes nothing (counted as"
                    " re-delivered).",
                    len(collector.records),
                    str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__,
                )
        if seed_prints:
            seeds.record(state_dir(), found.manifest, seed_prints, result)
        if debt is not None and owed and not holding:  # paid by a build of the downstream models
            left_out = {
                model
                for model in owed
                if found.selected is not None
                and not downstream_of(found.manifest, found.tables, model) <= found.selected
            }
            debt.keep(downstream.next_owed(owed, applied, False, bool(result.success), left_out))
        if progress is not None:
            print(f"{progress.closing()} ({time.monotonic() - started:.0f} s)", flush=True)
        refused = {model: 1 for model in found.refusals}  # at least one file each, if the log says no more
        if found.refusals:
            try:
                if warehouse is None:
                    raise unopened
                refused.update(log_refusals(warehouse, found, get_invocation_id()))
            except StorageError as error:  # the refusals' folders listed again: the refusals are still said below
                log.error("the batch log has no row for the refused tables: %s", error)
        if progress is not None and found.manifest is not None:
            report(found, collector.records if collector is not None else [], refused)
    finally:
        if warehouse is not None:
            warehouse.close()
    for line in run_summary(result, found.problems, found.blocked, found.tables):
        log.error("%s", line)
    return bool(result.success) and found.ok and recorded


# The raw files of each landing folder whose staging view the build makes, as the hooks listed them.
FILE_COUNTS_VARIABLE = "CDC_LANDING_FILE_COUNTS"
# The variables a run hands to its dbt build (set or left unset by each run, never inherited).
HANDED_VARIABLES = (
    FILE_COUNTS_VARIABLE,
    PLAN_VARIABLE,
    PLAN_PARTS_VARIABLE,
    STAGING_TEST_FILES_VARIABLE,
    staging_views.UNCHANGED_VARIABLE,
    staging_views.FINGERPRINTS_VARIABLE,
    seeds.UNCHANGED_VARIABLE,
    META_READY_VARIABLE,
    SINGLE_WRITER_VARIABLE,
    REGISTERS_EMPTY_VARIABLE,
    SCHEMAS_VARIABLE,
    LISTINGS_VARIABLE,
    accounting.ACCOUNTING_VARIABLE,
    accounting.TOMBSTONE_SPOOL_VARIABLE,
)


def _embedded_session():
    """This process's own Spark session (the embedded target's, dbt's), or None: never starts one."""
    session_class = getattr(sys.modules.get("pyspark.sql.session"), "SparkSession", None)
    return getattr(session_class, "_instantiatedSession", None)


def _plan_states(warehouse: Warehouse, tables, plan: dict[str, dict], blocked: set[str]) -> None:
    """Adds to the plan of each evolved table with files to apply its state (project/iceberg.py:
    states_from_metadata, else table_states; macros/cdc/publish.sql: cdc_planned_state). On the single-writer
    target nothing else commits to it until its batch. A table whose state cannot be read this way (not an
    Iceberg table) leaves every batch to ask for its own."""
    planned = [
        t
        for t in tables
        if t.model not in blocked and plan.get(t.identifier, {}).get("columns") and plan[t.identifier].get("files")
    ]
    # From the metadata files the listing of their schema named (read by the schema evolution: no statement)
    located = {}
    for table in planned:
        where = warehouse.listed_metadata(table.schema).get(table.identifier.lower())
        if where:
            located[table.identifier] = where
    states = iceberg.states_from_metadata(located)
    relations = {t.identifier: quoted_relation(t.schema, t.identifier) for t in planned if t.identifier not in states}
    try:
        states.update(iceberg.table_states(warehouse, relations))
    except Exception as error:  # those batches ask for their own, as without a plan
        log.debug("the planned tables' states could not be read in one query: %s", error)
    for identifier, state in states.items():
        plan[identifier]["state"] = state


def _threads(own_tables_only: bool, dbt_args: Sequence[str]) -> list[str]:
    """dbt's threads for `make run`'s build on the single-writer target: CDC_THREADS, else 4, when each
    node commits only its own table (`own_tables_only`: the ledger, the batch log and the tombstones are
    written once after the build, commands/accounting.py), which is what makes threads safe there with
    Iceberg's Hive lock off (docs/ARCHITECTURE.md, "Threads"). A plain dbt command keeps the profile's 1;
    the cluster target its profile's CDC_THREADS; `--threads` given to the run wins."""
    if not own_tables_only or any(arg == "--threads" or arg.startswith("--threads=") for arg in dbt_args):
        return []
    return ["--threads", str(max(1, int(os.environ.get("CDC_THREADS") or EMBEDDED_THREADS)))]


def _tombstone_spool() -> str | None:
    """Where this run's batches spool their tombstones (macros/cdc/merge.sql: cdc_write_tombstones): the
    `_cdc_spool` folder of the embedded session's warehouse, or None (no session yet: written at once)."""
    session = _embedded_session()
    if session is None:
        return None
    try:
        return session.conf.get("spark.sql.warehouse.dir").rstrip("/") + "/_cdc_spool"
    except Exception:  # no warehouse folder set: the batches write their tombstones themselves
        return None


def _drop_batch_views() -> None:
    """The batch views a failed build left in this process's Spark session (the embedded target; named per
    invocation by macros/cdc/current_state.sql: cdc_batch_view, so they never collide with a later
    batch's): dropped, which uncaches them, so that a long-lived process (`run --every`) does not keep
    them. On the cluster target each dbt connection's session ends with the build, and its views."""
    session = _embedded_session()
    if session is None:
        return
    try:
        for row in session.sql("show views like '*__cdc_*'").collect():
            if row.isTemporary:
                session.catalog.dropTempView(row.viewName)
    except Exception as error:  # a cleanup: the run's outcome is already decided
        log.debug("could not drop the failed batches' views: %s", error)


FULL_REFRESH = ("--full-refresh", "-f")


def _full_refresh(dbt_args: Sequence[str]) -> bool:
    return any(arg in FULL_REFRESH for arg in dbt_args)


def runs_args(dbt_args: Sequence[str]) -> Callable[[], list[str]]:
    """The dbt arguments of each run of a `run --every` loop, one call per run: `dbt_args` for the first, the
    same without `--full-refresh` for the others (a loop started to rebuild its tables; a rebuild every
    SECONDS would read every file again each time)."""
    later = [arg for arg in dbt_args if arg not in FULL_REFRESH]
    runs = 0

    def next_args() -> list[str]:
        nonlocal runs
        runs += 1
        return list(dbt_args if runs == 1 else later)

    return next_args


def report(found: Hooks, records: Sequence[dict], refused: Mapping[str, int], stream=None) -> list[str]:
    """Prints the run's table: one line per current-state table this run applied (what each batch logged
    for it, `records`, commands/accounting.py, by the batch log's column names) or refused (`refused`: the
    tables the hooks refused, with the files each refusal names), so it costs no statement: no read of the
    batch log or of the tables (the lag is the batch's own newest change; `status` reads the history and
    counts each table's rows)."""
    rows = [{"model_name": r["model"], **r["run_table_row"]} for r in records if r.get("run_table_row")]
    rows += [{"model_name": model, "status": "refused", "files_refused": n} for model, n in refused.items()]
    lines = [f"this run ({get_invocation_id()[:8]}), per current-state table; {BATCH_LOG} has the details:"]
    lines += status.run_table([t.model for t in found.tables], rows, status.now_utc())
    for line in lines:
        print(line, file=stream or sys.stdout, flush=True)
    return lines
