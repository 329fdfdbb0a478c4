"""Where the project and its tests are, and the import path a process of the tests needs."""

from __future__ import annotations

import os
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[3]
# tests/pytest: the import root of `helpers` and `oracles`, next to the project (pytest.ini's pythonpath).
TESTS = PROJECT / "tests" / "pytest"


def import_path(environ: dict[str, str]) -> str:
    """PYTHONPATH for a subprocess that imports the project and the test helpers, as pytest does."""
    return os.pathsep.join(filter(None, [str(PROJECT), str(TESTS), environ.get("PYTHONPATH")]))
