"""The README's first hour, as a new user runs it, in subprocesses with a warehouse and landing zone
of their own: `make demo`, then `make docs`, `make status` and `dbt source freshness` on what the
demo left (its schema-evolution stage included).

- the demo prints under 200 lines: per stage, a progress line per table and the run's table (rows,
  inserted, updated, deleted, ignored, refused, lag), and at the end the demo's summary; dbt's own
  per-node lines go to its log file;
- `make docs` exits 0 although the demo's schema evolution added columns no yml lists;
- `make status` exits 0: every table fresh (the demo writes its change timestamps relative to now);
- `dbt source freshness` reports no error on the sample data.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from helpers import parse_template
from python_hooks.project import embedded_lock

PROJECT = Path(__file__).resolve().parents[2]
# make demo and what follows it, as a new user runs them; make test-all (nightly): its pipeline is every other test's
pytestmark = [pytest.mark.subprocess, pytest.mark.nightly]

TABLES = [
    "crm__customer_address",
    "crm__customer_master",
    "inventory__product",
    "salesdb__customer",
    "salesdb__sales_order",
]


@pytest.fixture(scope="module")
def demo(tmp_path_factory, spark) -> dict:
    """`make demo` and what follows it, run once while this pytest process has its own warehouse open
    (`spark`): the demo must leave that warehouse alone."""
    work = tmp_path_factory.mktemp("demo")
    environ = {
        name: value
        for name, value in os.environ.items()
        # the pytest session's own choices (conftest.py), not a new user's; CDC_STATE_DIR is the session's
        # warehouse folder, which the demo would otherwise take as the user's and delete
        if name
        not in {
            "CDC_SCHEMA",
            "CDC_DEFAULTED",
            "CDC_DERIVED",
            "CDC_STATE_DIR",
            "CDC_ERASURE_SECRET",
            "CDC_KILL_AT",
            "CDC_VERBOSE",
        }
    }
    environ.update(
        CDC_WAREHOUSE=str(work / "warehouse"),
        CDC_LANDING_ROOT=str(work / "landing"),
        DBT_TARGET_PATH=str(work / "target"),
        DBT_LOG_PATH=str(work / "logs"),
    )

    def run(*command: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            command, cwd=PROJECT, env=environ, capture_output=True, text=True, timeout=1200, check=False
        )

    # the pytest run's one parse, for the demo's default schema (the profile's, CDC_SCHEMA unset here)
    parse_template.seed(work / "target", "lakehouse", work / "landing", target_arg=None)
    result = {"demo": run("make", "--no-print-directory", "demo")}
    if result["demo"].returncode == 0:
        result["docs"] = run("make", "--no-print-directory", "docs")
        result["status"] = run("make", "--no-print-directory", "status")
        result["freshness"] = run(str(PROJECT / ".venv" / "bin" / "dbt"), "source", "freshness")
    result["work"] = work
    return result


def _output(process: subprocess.CompletedProcess) -> str:
    return process.stdout + process.stderr


def test_demo_prints_under_200_lines_with_the_per_table_summary(demo):
    output = _output(demo["demo"])
    assert demo["demo"].returncode == 0, output[-4000:]
    lines = output.splitlines()
    assert len(lines) < 200, f"make demo printed {len(lines)} lines"
    assert not [line for line in lines if re.search(r"\b(START|OK created|PASS) ", line)], "dbt per-node lines"
    assert output.count("this run (") == 5, "one table per stage's run"
    summary = output[output.index("=== demo summary") :].splitlines()
    assert summary[1].split()[:3] == ["table", "rows", "runs"], summary[:2]
    rows = {line.split()[0]: line.split() for line in summary[2:] if line.split() and line.split()[0] in TABLES}
    assert sorted(rows) == TABLES, summary
    for table, cells in rows.items():
        assert int(cells[2]) >= 4, f"{table}: {cells[2]} runs in the batch log"  # stages 1-4, 5 for evolved ones
    assert (demo["work"] / "logs" / "dbt.log").stat().st_size > 100_000, "dbt's lines went to the log file"


def test_docs_build_after_the_demo_schema_evolution(demo):
    assert "docs" in demo, "make demo failed"
    output = _output(demo["docs"])
    assert demo["docs"].returncode == 0, output[-4000:]
    # the columns the demo's schema evolution added are reported, not failed
    for column in ("credit_limit", "birth_date", "status"):
        assert column in output, f"{column}: not reported by the docs check\n{output[-3000:]}"
    assert (demo["work"] / "target" / "static_index.html").exists()
    assert (demo["work"] / "target" / "manual" / "index.html").exists(), "make docs built no manual beside the site"


def test_status_after_the_demo_is_ok(demo):
    assert "status" in demo, "make demo failed"
    output = _output(demo["status"])
    assert demo["status"].returncode == 0, output[-4000:]
    assert "5 table(s): 5 ok" in output, output[-3000:]


def test_source_freshness_after_the_demo_has_no_error(demo):
    assert "freshness" in demo, "make demo failed"
    output = _output(demo["freshness"])
    assert demo["freshness"].returncode == 0, output[-4000:]
    assert len(re.findall(r"\bPASS freshness of ", output)) == 5, output[-3000:]


def test_the_demo_leaves_the_warehouse_another_process_has_open(demo):
    """This pytest process's warehouse (its Derby metastore and lock file) is where it was: the demo
    deleted only its own folders (a CDC_STATE_DIR inherited from this process once made it delete this
    process's warehouse, under its running Spark session)."""
    held = embedded_lock._held
    assert held is not None, "the run's session holds its warehouse"
    assert os.fstat(held.fileno()).st_ino == os.stat(held.name).st_ino, "the lock file was deleted and made again"
    assert (Path(held.name).parent / "metastore_db").is_dir()
