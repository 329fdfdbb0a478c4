"""Fault injection: `make run` killed with SIGKILL at a named point of a run, then run again.

Each test is a warehouse of its own, worked by processes as a scheduler starts them
(tests/pytest/helpers/fault_run.py, in a process group of its own: the kill takes its Spark JVM too, as a
crash of the machine or container would): the sample's stage 1 is applied; stage 2 lands and its run
kills itself at the point (python_hooks/project/faults.py, CDC_KILL_AT); then a plain run with nothing new
lands. After it, every table equals the pure-Python replay of every raw file (no lost and no doubled
change), no branch is left on any table, the ledger lists every file once, and the run that
recovered needed no hand: no lock, temporary table or branch stood in its way.

`make faults` runs every point; `make test` the merge killed mid-statement (CI's time). The seconds
each recovery run took go to target/faults/report.jsonl.
"""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.faults import (
    BOTH_PATHS,
    BRANCH_POINTS,
    CRM,
    HELPER,
    KILLED_RUN_OTHERS,
    MERGE_POINTS,
    Dumped,
    assert_batch_log_never_lies,
    assert_crm_equals_replay,
    assert_killed,
    assert_ledger_lists_each_file_once,
    fault_process,
    killed_batch,
    record,
    recovered_seconds,
    tail,
)
from helpers.paths import PROJECT, import_path
from helpers.tables import assert_same_table
from oracles.replay_history import CUSTOMER_ATTRIBUTES, CustomerSnapshot, joined_customers
from sample_data import dms

pytestmark = pytest.mark.subprocess  # each run is a process of its own, with its own embedded Spark

CUSTOMER = ("--select", "+dim_customer", "--indirect-selection", "cautious")
SMOKE = {"during_merge"}
SCHEMA = "faults"


def _process(
    tmp_path: Path, *args: str, kill_at: str | None = None, branch: bool = False
) -> tuple[subprocess.CompletedProcess, float]:
    environ = {**os.environ, "CDC_WAREHOUSE": str(tmp_path / "warehouse"), "CDC_TARGET": "local"}
    if branch:
        environ["CDC_ONE_MERGE_MAX_BYTES"] = "0"
    return fault_process(tmp_path, environ, SCHEMA, *args, kill_at=kill_at)


def _kill_then_recover(
    tmp_path: Path, point: str, first: tuple, second: tuple, build: tuple, branch: bool = False
) -> Dumped:
    """Stage 1 applied and stage 2 killed at `point` (one process), then a recovery run (another);
    returns the recovery's dump. `branch`: the killed run takes the append + MERGE on a branch."""
    killed, _ = _process(tmp_path, *first, *second, "--", *build, kill_at=point, branch=branch)
    assert_killed(killed, point)
    dumped = tmp_path / "dump.pickle"
    recovered, _ = _process(tmp_path, "--dump", str(dumped), "--", *build)
    seconds = recovered_seconds(recovered, f"the kill at {point}")
    record("local", f"kill at {point}" + (" (branch)" if branch else ""), seconds, point=point)
    with dumped.open("rb") as source:
        state = pickle.load(source)
    for relation, table in state["tables"].items():
        assert table["branches"] in (None, [], ["main"]), f"{relation}: branches left {table['branches']}"
    assert state["ledger_duplicates"] == [], "a raw file listed twice in the ledger"
    return Dumped(state)


@pytest.mark.parametrize(
    ("point", "branch"),
    [
        pytest.param(
            p, branch, marks=() if p in SMOKE else pytest.mark.faults_full, id=p + ("-branch" if branch else "")
        )
        for p in MERGE_POINTS
        for branch in ([False, True] if p in BOTH_PATHS else [p in BRANCH_POINTS])
    ],
)
def test_killed_batch_is_repaired_by_the_next_run(tmp_path, point, branch):
    table = MERGE_POINTS[point]
    kill_at = f"{point}:{table}" if table else point
    tables = _kill_then_recover(tmp_path, kill_at, ("--stage", "1"), ("--stage", "2"), CRM, branch=branch)
    landing = tmp_path / "landing"
    assert_crm_equals_replay(tables, SCHEMA, landing, f"killed at {kill_at}")
    assert_ledger_lists_each_file_once(tables, SCHEMA, landing)
    # The other model: applied whole by the killed run (but recorded only by the recovery) or by the recovery.
    batches = {"crm__customer_master": killed_batch(point, branch)}
    assert_batch_log_never_lies(tables, SCHEMA, landing, tmp_path / "stage_names", batches, others=KILLED_RUN_OTHERS)


@pytest.mark.faults_full
def test_killed_schema_evolution_is_finished_by_the_next_run(tmp_path):
    """Killed between the two ALTERs of crm.customer_master (credit_limit, birth_date), before the
    evolution log: the next run adds the other column, and the rows read both."""
    state = _kill_then_recover(
        tmp_path,
        "during_schema_evolution:crm__customer_master",
        ("--stage", "1"),
        ("--stage", "2", "--evolve", "dms_new_types"),
        CRM,
    )
    columns = state.columns("faults_current.crm__customer_master")
    assert {"credit_limit", "birth_date"} <= set(columns)
    assert_crm_equals_replay(state, SCHEMA, tmp_path / "landing", "killed during schema evolution")
    logged = sorted(row["column_name"] for row in state.records("faults_cdc_meta.schema_evolution_log"))
    assert logged == ["birth_date", "credit_limit"], "each applied change logged once"


@pytest.mark.faults_full
def test_killed_snapshot_is_taken_by_the_next_run(tmp_path):
    """Killed while `customer_snapshot` merges stage 2's versions: the next run takes that snapshot
    once, so the SCD2 history is the replay's with one snapshot per stage."""
    state = _kill_then_recover(
        tmp_path,
        "during_snapshot",
        ("--stage", "1", "--producer", "dms", "--producer", "debezium"),
        ("--stage", "2"),
        CUSTOMER,
    )
    landing = tmp_path / "landing"
    expected = CustomerSnapshot()
    # stage 1's run, then stage 2's (killed) and the recovery: one snapshot of stage 2's state
    from sample_data import debezium

    first = tmp_path / "stage1"
    dms.write_stage(first, 1)
    debezium.write_stage(first, 1)
    expected.run(joined_customers(first))
    expected.run(joined_customers(landing))
    columns = ["customer_id", *CUSTOMER_ATTRIBUTES, "valid_from", "valid_to", "is_current", "is_deleted"]
    actual = state.table_rows("faults_marts.dim_customer", ["customer_id", "valid_from"], columns)
    wanted = {k: {c: row[c] for c in columns} for k, row in expected.dim_rows().items()}
    assert_same_table(actual, wanted, "dim_customer after a snapshot killed mid-merge")


@pytest.mark.faults_full
def test_second_run_on_the_embedded_warehouse_is_refused_and_the_first_finishes(tmp_path):
    """Two `make run`s at once on the embedded target: the second is refused at once, naming the
    first; the first, held in the middle of its batch meanwhile, finishes, and its tables equal the replay."""
    first, _ = _process(tmp_path, "--stage", "1", "--", *CRM)
    assert first.returncode == 0, tail(first)
    environ = {
        **os.environ,
        "PYTHONPATH": import_path(os.environ),
        "CDC_WAREHOUSE": str(tmp_path / "warehouse"),
        "CDC_TARGET": "local",
        "CDC_PAUSE_AT": "before_publish:crm__customer_master",
        "CDC_PAUSE_SECONDS": "40",
    }
    environ.pop("CDC_KILL_AT", None)
    command = [sys.executable, *HELPER, "--landing", str(tmp_path / "landing"), "--schema", "faults"]
    dumped = tmp_path / "dump.pickle"
    running = subprocess.Popen(
        [*command, "--target-path", str(tmp_path / "target"), "--stage", "2", "--dump", str(dumped), "--", *CRM],
        env=environ,
        cwd=PROJECT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        lines = []
        for line in running.stdout:  # until the first run is in the middle of its batch
            lines.append(line)
            if "pause point before_publish" in line:
                break
        assert any("pause point before_publish" in line for line in lines), "".join(lines[-40:])
        second, seconds = _process(tmp_path, "--target-path", str(tmp_path / "target2"), "--", *CRM)
        output = second.stdout + second.stderr
        assert second.returncode != 0
        assert f"is in use by pid {running.pid} " in output, output[-3000:]
        assert seconds < 90 and "XSDB6" not in output, "refused at once, without Derby's stack traces"
        rest = running.communicate(timeout=600)[0]
    finally:
        if running.poll() is None:
            os.killpg(running.pid, signal.SIGKILL)
    assert running.returncode == 0, rest[-3000:]
    with dumped.open("rb") as source:
        state = Dumped(pickle.load(source))
    assert_crm_equals_replay(state, SCHEMA, tmp_path / "landing", "the first run, beside a refused second one")
