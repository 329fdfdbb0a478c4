"""The pipeline once, as `make run` (and a scheduler) calls it:

1. `dbt parse`: the manifest tells which tables are CDC tables and where their raw files are;
2. the pipeline state tables are created (on `local`, this opens the process's Spark session);
3. the schema-evolution hook evolves every current-state Iceberg table it can, through the dbt
   adapter of the same target (python_hooks/warehouse.py), so this works on every target;
4. `dbt build` (models, snapshots, tests in DAG order), without the tables the hook refused;
5. exit status: non-zero if dbt failed or any change was refused, with one message per refusal.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

from python_hooks.warehouse import Warehouse, state_dir

log = logging.getLogger(__name__)


def run_hooks(runner, common_args: Sequence[str] = ()) -> tuple[bool, list[str], set[str]]:
    """Parse, create the state tables, evolve. Returns (ok, problems, models dbt must not build).
    `common_args` go to every dbt command and say which target the hooks use (--target)."""
    from python_hooks.evolve import evolve

    parsed = runner.invoke(["parse", *common_args])
    if not parsed.success:
        return False, ["dbt parse failed: see the errors above"], set()
    started = runner.invoke(["run-operation", "cdc_create_meta_tables", *common_args])
    if not started.success:
        return False, ["could not connect to the warehouse / create the pipeline state tables"], set()
    with Warehouse.open(common_args) as warehouse:
        log.info(
            "target %s, schema %s, landing %s", warehouse.target, warehouse.schema, os.environ.get("CDC_LANDING_ROOT")
        )
        result = evolve(warehouse, parsed.result, state_dir())
    for change in result.applied:
        log.info(
            "schema evolution: %s.%s %s %s -> %s",
            change.table,
            change.column,
            change.action,
            change.old_type or "-",
            change.new_type,
        )
    return result.ok, result.problems, result.blocked_models


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

    runner = runner or dbtRunner()
    problems: list[str] = []
    blocked: set[str] = set()
    hooks_ok = True
    dbt_args, shared = split_shared_options(dbt_args)
    common_args = [*common_args, *shared]
    if hooks:
        hooks_ok, problems, blocked = run_hooks(runner, common_args)
        if not hooks_ok and not blocked:
            for problem in problems:
                log.error(problem)
            return False
    exclude = ["--exclude", *sorted(f"{model}+" for model in blocked)] if blocked else []
    # Unit tests check the SQL, not the data: they belong to CI (`make test`), not to every scheduled run.
    result = runner.invoke(["build", *exclude, "--exclude-resource-type", "unit_test", *dbt_args, *common_args])
    if not result.success:
        log.error("dbt build failed: see the errors above")
    for problem in problems:
        log.error("refused: %s", problem)
    if blocked:
        log.error("not built this run (fix the above, then run again): %s", ", ".join(sorted(blocked)))
    return bool(result.success) and hooks_ok
