"""The pipeline once, as `make run` (and a scheduler) calls it:

1. `dbt parse`: the manifest tells which tables are CDC tables and where their raw files are;
2. the pipeline state tables are created (on `local`, this opens the process's Spark session);
3. the tables with nothing new are found (`idle_models`); the schema-evolution hook evolves every
   other current-state Iceberg table it can, through the dbt
   adapter of the same target (python_hooks/warehouse.py), so this works on every target;
4. `dbt build` (models, snapshots, tests in DAG order), without the tables the hook refused and
   without the current-state models that have nothing to apply (`idle_models`: every raw file of
   their folder is in their ledger), so a run with nothing new reads no raw file and commits nothing;
5. exit status: non-zero if dbt failed or any change was refused; the last lines, after dbt's own
   summary, say what was refused or failed and what to do (`run_summary`).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Sequence

from python_hooks.warehouse import Warehouse, state_dir

log = logging.getLogger(__name__)


def idle_models(warehouse: Warehouse, tables) -> set[str]:
    """The current-state models (and their staging models) with nothing to apply: the table exists
    and every raw file its folder lists is in its ledger. One query over the folders' listings (the
    binaryFile tables staging made, macros/cdc/landing.sql) and the ledger; no raw file is read.
    A model whose listing table does not exist yet is not idle."""
    from python_hooks.schema_plan import quote_ident, sql_string

    meta = warehouse.meta_schema
    known = [
        t for t in tables if warehouse.table_exists(t.schema, t.identifier) and warehouse.table_exists(meta, t.probe)
    ]
    if not known or not warehouse.table_exists(meta, "cdc_file_ledger"):
        return set()
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
    pending = dict(warehouse.query(" union all ".join(parts)))
    idle = set()
    for table in known:
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


def run_hooks(runner, common_args: Sequence[str] = ()) -> tuple[bool, list[str], set[str], set[str]]:
    """Parse, create the state tables, evolve, find the idle tables. Returns (ok, problems, models dbt
    must not build, models with nothing to apply). `common_args` go to every dbt command and say
    which target the hooks use (--target)."""
    from python_hooks.evolve import cdc_tables, evolve

    parsed = runner.invoke(["parse", *common_args])
    if not parsed.success:
        return False, ["dbt parse failed: see the errors above"], set(), set()
    started = runner.invoke(["run-operation", "cdc_create_meta_tables", *common_args])
    if not started.success:
        return False, ["could not connect to the warehouse / create the pipeline state tables"], set(), set()
    with Warehouse.open(common_args) as warehouse:
        log.info(
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
    for change in result.applied:
        log.info(
            "schema evolution: %s.%s %s %s -> %s",
            change.table,
            change.column,
            change.action,
            change.old_type or "-",
            change.new_type,
        )
    if idle:
        quiet = sorted(t.model for t in tables if t.model in idle)
        log.info("nothing new for %s: not built this run", ", ".join(quiet))
    return result.ok, result.problems, result.blocked_models, idle


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


def run_pipeline(
    dbt_args: Sequence[str] = (), runner=None, hooks: bool = True, common_args: Sequence[str] = ()
) -> bool:
    """True when every step succeeded. `runner` lets a caller reuse one dbtRunner (one Spark session);
    `common_args` go to every dbt command (e.g. --project-dir, --target-path)."""
    from dbt.cli.main import dbtRunner

    if runner is None:
        from python_hooks import faults

        runner = dbtRunner(callbacks=[faults.dbt_callback] if faults.enabled() else [])
    problems: list[str] = []
    blocked: set[str] = set()
    idle: set[str] = set()
    hooks_ok = True
    dbt_args, shared = split_shared_options(dbt_args)
    common_args = [*common_args, *shared]
    if hooks:
        hooks_ok, problems, blocked, idle = run_hooks(runner, common_args)
        if not hooks_ok and not blocked:
            for problem in problems:
                log.error(problem)
            return False
    excluded = sorted({f"{model}+" for model in blocked} | idle)
    exclude = ["--exclude", *excluded] if excluded else []
    # Unit tests check the SQL, not the data: they belong to CI (`make test`), not to every scheduled run.
    result = runner.invoke(["build", *exclude, "--exclude-resource-type", "unit_test", *dbt_args, *common_args])
    for line in run_summary(result, problems, blocked):
        log.error("%s", line)
    return bool(result.success) and hooks_ok


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
