"""`python -m python_hooks add-source`: a new source table in one command (python_hooks/sources/)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from python_hooks.project import env
from python_hooks.sources import add_source as scaffold

log = logging.getLogger("python_hooks.add_source")


def run_add_source(
    project_dir: Path,
    producer: str,
    names: Sequence[str],
    keys: Sequence[str],
    source_name: str | None,
    table_name: str | None,
    timestamp_column: str | None,
    landing_root: str,
    target: str,
) -> list[str] | None:
    """What add-source wrote and the next command, as lines; None when refused (logged, nothing written)."""
    try:
        plan = scaffold.add_source(
            project_dir, landing_root, producer, names, keys, source_name, table_name, timestamp_column
        )
    except scaffold.AddSourceError as error:
        log.error("add-source refused: %s", error)
        return None
    return scaffold.summary(plan, project_dir, landing_root, target, env.PROJECT_ROOT)
