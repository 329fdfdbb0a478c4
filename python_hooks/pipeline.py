"""The pipeline once, as `make run` (and a scheduler) calls it: the pre-dbt hooks, then `dbt build`
(models, snapshots and their tests in DAG order; a failed test stops what depends on it)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

log = logging.getLogger(__name__)


def run_pipeline(dbt_args: Sequence[str] = (), runner=None) -> bool:
    """True when every step succeeded. `runner` lets a caller reuse one dbtRunner (one Spark session)."""
    from dbt.cli.main import dbtRunner

    runner = runner or dbtRunner()
    result = runner.invoke(["build", *dbt_args])
    if not result.success:
        log.error("dbt build failed: see the errors above")
    return bool(result.success)
