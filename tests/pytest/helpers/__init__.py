"""What the tests share besides fixtures (those are in ../conftest.py): the project's paths, the
in-process dbt runner, whole-table comparison, stage-by-stage runs and their checks, the cluster
target's client, the local S3 server (s3.py), the fault-injection process (fault_run.py) and what is
checked after a fault (faults.py), and what "a refused file changes nothing" means (refusal.py).

Imported as `helpers` (pytest.ini's `pythonpath` puts tests/pytest on the import path)."""

import pytest

# Their asserts explain a failure as a test's own do (what pytest gives conftest.py and test modules).
pytest.register_assert_rewrite(
    "helpers.cluster",
    "helpers.dbt_runner",
    "helpers.faults",
    "helpers.refusal",
    "helpers.runs",
    "helpers.s3",
    "helpers.tables",
)
