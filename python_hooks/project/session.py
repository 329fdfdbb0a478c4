"""One session per command: one dbtRunner (one Spark session on the embedded target), one parse,
the pipeline's own tables, one warehouse. Every command that reads the project or the warehouse
starts here, so "parse, create the meta tables, open the warehouse" is written once.

    with Session.start(["--target", "cluster"]) as session:
        tables = cdc_tables(session.manifest)
        session.warehouse.query("select ...")
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import TracebackType

from python_hooks.project.meta import META_TABLES
from python_hooks.project.storage import failure_in
from python_hooks.project.warehouse import Warehouse

PARSE_FAILED = "dbt parse failed: see the errors above"
META_FAILED = "could not connect to the warehouse / create the pipeline state tables"


class SessionError(RuntimeError):
    """The project could not be parsed, or the warehouse not reached: dbt printed why."""


def dbt_runner(callbacks: Sequence[Callable] = ()):
    """A dbtRunner; one per process, so that every dbt command of a command shares its Spark session."""
    from dbt.cli.main import dbtRunner  # dbt loads in a second or two: only for commands that use it

    return dbtRunner(callbacks=list(callbacks))


def parse(runner, dbt_args: Sequence[str], quiet: bool = True):
    """The project's manifest (`dbt parse`); SessionError when dbt cannot parse it.

    A runner that parsed before (a loop's later runs, one process) parses without writing target/manifest.json,
    then writes it only when the project is no longer as its last written manifest found it (dbt's own record of
    it: each file's hash, the vars and environment variables it read): writing the file was two thirds of a warm
    parse of this project (0.33 s against 0.11 s without; bench/TUNING.md, round 40)."""
    flags = ["--quiet"] if quiet else []
    written = _WRITTEN.get(runner)
    if written is not None and written[0] == tuple(dbt_args):
        parsed = runner.invoke(["parse", *flags, "--no-write-json", *dbt_args])
        if parsed.success and project_state(parsed.result, dbt_args) == written:
            return parsed.result
    parsed = runner.invoke(["parse", *flags, *dbt_args])
    if not parsed.success:
        raise SessionError(PARSE_FAILED)
    _WRITTEN[runner] = project_state(parsed.result, dbt_args)
    return parsed.result


# Per runner, what the manifest it last wrote was parsed from (`_project_state`); gone with the runner.
_WRITTEN: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def project_state(manifest, dbt_args: Sequence[str]) -> tuple:
    """What a manifest was parsed from, as dbt's partial parsing checks it (a loop's selection is kept on it too,
    commands/selection.py: selected_nodes): the arguments, each file's hash, the vars, profile and project hashes,
    the environment variables the project read."""
    files = {name: file.checksum.checksum for name, file in manifest.files.items()}
    return tuple(dbt_args), files, manifest.state_check.to_dict(), dict(manifest.env_vars)


def create_meta_tables(runner, dbt_args: Sequence[str], quiet: bool = True) -> None:
    """The pipeline's own tables (macros/cdc/meta.sql: cdc_create_meta_tables), created if missing;
    on the embedded target this opens the process's Spark session."""
    flags = ["--quiet"] if quiet else []
    created = runner.invoke(["run-operation", "cdc_create_meta_tables", *flags, *dbt_args])
    if not created.success:
        said = [str(created.exception or "")]
        said += [str(getattr(r, "message", "") or "") for r in getattr(created.result, "results", None) or []]
        storage = failure_in("\n".join(said))  # the warehouse on S3 failed: said as the Python side says it
        raise SessionError(str(storage) if storage is not None else META_FAILED)


@dataclass
class Session:
    runner: object
    manifest: object
    warehouse: Warehouse

    @classmethod
    def start(
        cls, dbt_args: Sequence[str] = (), *, runner=None, quiet: bool = True, meta_tables: bool = False
    ) -> Session:
        """Parse, create the meta tables (`meta_tables`), open the warehouse of the target in
        `dbt_args`. SessionError (dbt has printed why) when a step fails."""
        runner = runner if runner is not None else dbt_runner()
        manifest = parse(runner, dbt_args, quiet)
        warehouse = Warehouse.open(dbt_args)
        if meta_tables and not warehouse.has_meta_tables(META_TABLES):
            # one query of their snapshots says they all exist; only when one is missing, a dbt operation
            warehouse.close()
            create_meta_tables(runner, dbt_args, quiet)
            warehouse = Warehouse.open(dbt_args)
        return cls(runner, manifest, warehouse)

    def close(self) -> None:
        self.warehouse.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, kind: type | None, error: BaseException | None, trace: TracebackType | None) -> None:
        self.close()
