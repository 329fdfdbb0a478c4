"""dbt and the Python hooks run in the test process, so that they share its one Spark session."""

from __future__ import annotations

import os
from pathlib import Path

from helpers import parse_template
from helpers.paths import PROJECT


class Dbt:
    """Runs dbt in this process against a landing folder and a schema of the caller's choice."""

    def __init__(self, work: Path) -> None:
        from dbt.cli.main import dbtRunner

        self._runner = dbtRunner()
        self._work = work

    def _common(self, landing: Path, schema: str, project: Path | None = None, target: str = "local") -> list[str]:
        """`project`: another project folder than this one (e.g. a copy a test changed)."""
        path = self.target_path(schema)
        if project is None and target == "local":
            parse_template.seed(path, schema, landing)  # the run's one parse
        os.environ["CDC_LANDING_ROOT"] = str(landing)
        os.environ["CDC_SCHEMA"] = schema
        project_dir = str(project or PROJECT)
        return ["--project-dir", project_dir, "--target-path", str(path), "--log-path", str(path / "logs")]

    def target_path(self, schema: str) -> Path:
        """dbt's target folder for `schema` (compiled SQL, run results)."""
        return self._work / schema

    def __call__(self, *args: str, landing: Path, schema: str, target: str = "local", project: Path | None = None):
        return self._runner.invoke([*args, *self._common(landing, schema, project, target), "--target", target])

    def pipeline(
        self,
        *build_args: str,
        landing: Path,
        schema: str,
        target: str = "local",
        project: Path | None = None,
        hold_downstream: bool = False,
    ) -> bool:
        """`make run`: the Python hooks, then `dbt build` (python_hooks.pipeline), in this process; with
        `hold_downstream`, a turn of `run --every --downstream-every` that holds the downstream models back."""
        from python_hooks.commands.run import run_pipeline

        common = [*self._common(landing, schema, project, target), "--target", target]
        return run_pipeline(build_args, runner=self._runner, common_args=common, hold_downstream=hold_downstream)

    def status(self, landing: Path, schema: str, now=None, target: str = "local") -> list:
        """`python -m python_hooks status`, in this process: the status of every current-state table."""
        from python_hooks.commands import status
        from python_hooks.project.warehouse import Warehouse

        common = [*self._common(landing, schema, target=target), "--target", target]
        parsed = self._runner.invoke(["parse", "--quiet", *common])
        assert parsed.success, parsed.exception
        with Warehouse.open(common) as warehouse:
            return status.collect(warehouse, parsed.result, now=now)
