"""What every stage of a run uses: dbt in this process (a command, or `make run`'s equivalent),
landing raw files, and checking a table against the generator's replay."""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import os
import time
from pathlib import Path

from bench.generate import TableData, expected_state, table_checksum
from bench.instrument import SqlProfile, Statement
from bench.project import BenchProject
from bench.sql import Sql
from python_hooks.project.storage import Location, upload

log = logging.getLogger(__name__)

LAYOUTS = ("flat", "dated")


class BenchError(RuntimeError):
    pass


@contextlib.contextmanager
def environment(**values: str):
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


class _TimedRunner:
    """A dbtRunner as python_hooks.commands.run.run_pipeline uses it (`invoke`, `manifest`, `callbacks`),
    timing each command. Without `callbacks` the run would take the path of a plain `dbt run` (each node
    records its own batch, one thread), not `make run`'s (the accounting once per run, threads)."""

    def __init__(self, runner, profile: SqlProfile | None = None) -> None:
        self._runner = runner
        self._profile = profile  # its open statements end when a dbt command starts
        self.commands: list[tuple[str, float]] = []

    @property
    def manifest(self):
        """The dbtRunner's preloaded manifest (run_pipeline hands the hooks' parse to dbt build)."""
        return self._runner.manifest

    @manifest.setter
    def manifest(self, value) -> None:
        self._runner.manifest = value

    @property
    def callbacks(self) -> list:
        """The dbtRunner's callbacks: run_pipeline adds the run's accounting (and finds its progress) there."""
        return self._runner.callbacks

    def invoke(self, args: list[str]):
        start = time.perf_counter()
        if self._profile is not None:
            self._profile.close(start)
        try:
            return self._runner.invoke(args)
        finally:
            name = " ".join(args[:2]) if args[0] == "run-operation" else args[0]
            self.commands.append((name, time.perf_counter() - start))


class BenchDbt:
    """dbt in this process, on one bench project, recording every statement it sends."""

    def __init__(self, project: BenchProject, schema: str, landing: Location, logs: Path, target: str) -> None:
        from dbt.cli.main import dbtRunner

        self.profile = SqlProfile()
        self._runner = dbtRunner(callbacks=[self.profile])
        self._project = project
        self._env = {"CDC_LANDING_ROOT": str(landing), "CDC_SCHEMA": schema}
        self._logs = logs
        self._target = target

    def _common(self) -> list[str]:
        return [
            "--quiet",
            "--target",
            self._target,
            "--project-dir",
            str(self._project.project_dir),
            "--profiles-dir",
            str(self._project.profiles_dir),
            "--log-path",
            str(self._logs),
        ]

    def __call__(self, *args: str) -> list[Statement]:
        first = len(self.profile.statements)
        with environment(**self._env):
            result = self._runner.invoke([*args, *self._common()])
        self.profile.close(time.perf_counter())
        if not result.success:
            raise BenchError(f"dbt {' '.join(args)} failed: {result.exception or 'see ' + str(self._logs / 'dbt.log')}")
        return self.profile.statements[first:]

    def pipeline(self, *dbt_args: str) -> tuple[list[Statement], dict[str, float]]:
        """`make run`'s equivalent in this process: python_hooks.pipeline.run_pipeline (dbt parse,
        the state tables, the schema-evolution hook, `dbt build [dbt_args]`) on this project. Returns the
        statements dbt sent and the seconds of each step: `parse`, `run-operation
        cdc_create_meta_tables` (what opens the session in a new process), `hooks` (the
        schema-evolution hook, between the dbt commands) and `build`."""
        from python_hooks.commands.run import run_pipeline

        timed = _TimedRunner(self._runner, self.profile)
        first = len(self.profile.statements)
        start = time.perf_counter()
        with environment(**self._env):
            ok = run_pipeline(dbt_args, runner=timed, common_args=self._common())
        seconds = time.perf_counter() - start
        self.profile.close(time.perf_counter())
        if not ok:
            raise BenchError(f"the pipeline (make run) failed on {self._project.project_dir}: see {self._logs}")
        steps = {name: round(s, 3) for name, s in timed.commands}
        steps["hooks"] = round(seconds - sum(s for _, s in timed.commands), 3)
        return self.profile.statements[first:], steps


def landed_path(path: Path, folder: Location, layout: str = "flat") -> Location:
    """Where a raw file lands: in the table's folder, or (`dated`, DMS's DatePartitionEnabled with
    the default `yyyy/mm/dd` sequence) in the folder of the date it was written, which a DMS file
    name (LOAD files aside) starts with."""
    if layout == "flat" or path.name.startswith("LOAD"):
        return folder.join(path.name)
    written = dt.datetime.strptime(path.name[:8], "%Y%m%d")
    return folder.join(f"{written:%Y}/{written:%m}/{written:%d}/{path.name}")


def land(files: list[Path], folder: Location, layout: str = "flat") -> list[Location]:
    """Move generated files from the outbox into the landing folder, as the producer's upload would:
    a rename on this disk; on S3 an upload (one PUT each), then the outbox's copy removed."""
    landed = []
    for path in files:
        target = landed_path(path, folder, layout)
        if target.is_local:
            target.local_path.parent.mkdir(parents=True, exist_ok=True)
            os.replace(path, target.local_path)
        else:
            upload(path, target)
            path.unlink()
        landed.append(target)
    return landed


def table_layout(sql: Sql, relation: str) -> dict:
    """Files behind the table's current snapshot: data files and delete files, with sizes."""
    layout = {}
    for content, files, records, size in sql.query(
        f"select content, count(*) as files, sum(record_count) as records, sum(file_size_in_bytes) as bytes "
        f"from {relation}.files group by content"
    ):
        kind = {0: "data", 1: "position_deletes", 2: "equality_deletes"}.get(content, str(content))
        layout[kind] = {"files": files, "records": records, "mb": round(size / 2**20, 1)}
    return layout


def check(sql: Sql, relation: str, data: TableData, through_batch: int, label: str) -> dict:
    """The table against the generator's replay (row count and checksums)."""
    actual = table_checksum(sql, relation)
    expected = expected_state(data, through_batch)
    result = {
        "label": label,
        "relation": relation,
        "expected": expected.as_dict(),
        "actual": actual.as_dict(),
        "equal": actual == expected,
    }
    if actual != expected:
        log.error("%s: table %s differs from the replay: expected %s, actual %s", label, relation, expected, actual)
    return result
