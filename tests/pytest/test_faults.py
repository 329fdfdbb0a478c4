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

import json
import os
import pickle
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers.paths import PROJECT, import_path
from helpers.tables import assert_same_table
from oracles.replay_counts import COUNTS, dms_counts
from oracles.replay_dms import replay
from oracles.replay_history import CUSTOMER_ATTRIBUTES, CustomerSnapshot, joined_customers
from sample_data import dms

# helpers/fault_run.py, run as a module on the import path pytest has (helpers.paths.import_path)
HELPER = ["-m", "helpers.fault_run"]
CRM = ("--select", "staging.crm", "current_state.crm")
CUSTOMER = ("--select", "+dim_customer", "--indirect-selection", "cautious")
REPORT = PROJECT / "target" / "faults" / "report.jsonl"

# point -> (what the run builds, the table the kill is for, or None for the first that reaches it)
MERGE_POINTS = {
    "after_pin": "crm__customer_master",
    "after_validate": "crm__customer_master",
    "after_branch_created": "crm__customer_master",
    "during_insert": "crm__customer_master",
    "after_insert": "crm__customer_master",
    "during_merge": "crm__customer_master",
    "after_merge": "crm__customer_master",
    "after_publish": "crm__customer_master",
    "after_tombstones": "crm__customer_master",
    "during_compaction": None,
}
SMOKE = {"during_merge"}
# Points only the append + MERGE on a branch reaches (a table above cdc_one_merge_max_bytes, or a
# shared target): run with CDC_ONE_MERGE_MAX_BYTES=0. The sample tables are small, so every other
# point is reached on the one-MERGE path of the embedded target; after_merge is killed on both.
BRANCH_POINTS = {"after_branch_created", "during_insert", "after_insert", "after_publish"}
BOTH_PATHS = {"after_merge"}
# Points where the killed run's batch of crm__customer_master was committed to main but not logged
# (its changes are in the table, its log row never written); at a `during_*` point it may have been,
# when the statement finished before the kill (1 s). At during_compaction the batch was logged whole.
COMMITTED_UNLOGGED = {"after_publish", "after_tombstones"}
COMMITTED_UNLOGGED_ONE_MERGE = {"after_merge"}


def _process(
    tmp_path: Path, *args: str, kill_at: str | None = None, branch: bool = False
) -> tuple[subprocess.CompletedProcess, float]:
    environ = {
        **os.environ,
        "PYTHONPATH": import_path(os.environ),
        "CDC_WAREHOUSE": str(tmp_path / "warehouse"),
        "CDC_TARGET": "local",
        "CDC_KILL_DELAY": "1",
    }
    if branch:
        environ["CDC_ONE_MERGE_MAX_BYTES"] = "0"
    environ.pop("CDC_KILL_AT", None)
    command = [sys.executable, *HELPER, "--landing", str(tmp_path / "landing"), "--schema", "faults"]
    command += ["--target-path", str(tmp_path / "target")]
    if kill_at:
        command += ["--kill-at", kill_at]
    started = time.monotonic()
    done = subprocess.run(
        [*command, *args],
        env=environ,
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=900,
        start_new_session=True,  # its own process group: the kill takes its Spark JVM too
    )
    return done, time.monotonic() - started


def _tail(done: subprocess.CompletedProcess) -> str:
    return (done.stdout[-3000:] + "\n" + done.stderr[-3000:]).strip()


def _kill_then_recover(
    tmp_path: Path, point: str, first: tuple, second: tuple, build: tuple, branch: bool = False
) -> dict:
    """Stage 1 applied and stage 2 killed at `point` (one process), then a recovery run (another);
    returns the recovery's dump. `branch`: the killed run takes the append + MERGE on a branch."""
    killed, _ = _process(tmp_path, *first, *second, "--", *build, kill_at=point, branch=branch)
    assert killed.returncode == -signal.SIGKILL, f"expected a SIGKILL at {point}:\n{_tail(killed)}"
    assert f"cdc: kill point {point.split(':')[0]} of " in killed.stdout, _tail(killed)
    assert "fault_run: run 1 of 2 succeeded" in killed.stdout, "stage 1 was applied before the kill"
    dumped = tmp_path / "dump.pickle"
    recovered, _ = _process(tmp_path, "--dump", str(dumped), "--", *build)
    assert recovered.returncode == 0, f"the run after the kill at {point} failed:\n{_tail(recovered)}"
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    with REPORT.open("a", encoding="utf-8") as report:
        seconds = float(re.search(r"run 1 of 1 succeeded in ([0-9.]+) s", recovered.stdout).group(1))
        report.write(json.dumps({"point": point, "recovery_run_seconds": seconds}) + "\n")
    with dumped.open("rb") as source:
        state = pickle.load(source)
    for relation, table in state["tables"].items():
        assert table["branches"] in (None, [], ["main"]), f"{relation}: branches left {table['branches']}"
    assert state["ledger_duplicates"] == [], "a raw file listed twice in the ledger"
    return state


def _rows(state: dict, relation: str, key: list[str], columns: list[str]) -> dict[tuple, dict]:
    table = state["tables"][relation]
    index = {name.lower(): i for i, name in enumerate(table["columns"])}
    rows = {}
    for row in table["rows"]:
        record = {c: row[index[c]] for c in columns}
        k = tuple(record[c] for c in key)
        assert k not in rows, f"{relation}: duplicate key {k}"
        rows[k] = record
    return rows


def _assert_crm_equals_replay(state: dict, landing: Path, label: str) -> None:
    for table in dms.TABLES:
        relation = f"faults_current.crm__{table}"
        columns = [c.lower() for c in state["tables"][relation]["columns"] if not c.startswith("_cdc_")]
        expected = replay(landing / "dms" / "crm" / table, ["customer_id"])
        expected = {k: {c: row.get(c) for c in [*columns, "_cdc_op", "_cdc_ts"]} for k, row in expected.items()}
        actual = _rows(state, relation, ["customer_id"], [*columns, "_cdc_op", "_cdc_ts"])
        assert_same_table(actual, expected, f"{label}: {relation}")


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
    state = _kill_then_recover(tmp_path, kill_at, ("--stage", "1"), ("--stage", "2"), CRM, branch=branch)
    _assert_crm_equals_replay(state, tmp_path / "landing", f"killed at {kill_at}")
    _assert_batch_log_never_lies(state, tmp_path, point, branch)


def _assert_batch_log_never_lies(state: dict, tmp_path: Path, point: str, branch: bool = True) -> None:
    """The batch log after the kill and the recovery: stage 1's row and one row for stage 2's batch
    per table, equal to the replay's counts (tests/pytest/oracles/replay_counts.py); the one exception is a
    batch the killed run committed but could not log: the recovery logs it as changing nothing, its
    changes re-delivered (the table already holds them). Never a row for what did not happen."""
    log = state["tables"]["faults_cdc_meta.cdc_batch_log"]
    rows = sorted((dict(zip(log["columns"], row, strict=True)) for row in log["rows"]), key=lambda r: r["started_at"])
    scratch = tmp_path / "stage_names"
    written = {stage: dms.write_stage(scratch / str(stage), stage) for stage in (1, 2)}
    for table in dms.TABLES:
        model = f"crm__{table}"
        logged = [row for row in rows if row["model_name"] == model]
        stage_files = [{p.name for p in written[stage] if p.parent.name == table} for stage in (1, 2)]
        expected = dms_counts(tmp_path / "landing" / "dms" / "crm" / table, ["customer_id"], stage_files)
        assert [row["status"] for row in logged] == ["applied", "applied"], f"{model}: {logged}"
        counts = [{name: row[name] for name in COUNTS} for row in logged]
        assert counts[0] == {name: expected[0][name] for name in COUNTS}, f"{model} stage 1"
        exact = counts[1] == {name: expected[1][name] for name in COUNTS}
        committed = model == "crm__customer_master" and (
            point in COMMITTED_UNLOGGED
            or (not branch and point in COMMITTED_UNLOGGED_ONE_MERGE)
            or (point.startswith("during_") and not exact)
        )
        if committed:
            applied = counts[1]["rows_inserted"] + counts[1]["rows_updated"] + counts[1]["rows_deleted"]
            assert applied == 0 and counts[1]["ignored_redelivered"] > 0, f"{model} after {point}: {counts[1]}"
            assert counts[1]["change_events"] == expected[1]["change_events"]
        else:
            assert exact, f"{model} stage 2 ({point}): logged {counts[1]}, replay {expected[1]}"


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
    columns = state["tables"]["faults_current.crm__customer_master"]["columns"]
    assert {"credit_limit", "birth_date"} <= set(columns)
    _assert_crm_equals_replay(state, tmp_path / "landing", "killed during schema evolution")
    log = state["tables"]["faults_cdc_meta.schema_evolution_log"]
    logged = sorted(row[log["columns"].index("column_name")] for row in log["rows"])
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
    actual = _rows(state, "faults_marts.dim_customer", ["customer_id", "valid_from"], columns)
    wanted = {k: {c: row[c] for c in columns} for k, row in expected.dim_rows().items()}
    assert_same_table(actual, wanted, "dim_customer after a snapshot killed mid-merge")


@pytest.mark.faults_full
def test_second_run_on_the_embedded_warehouse_is_refused_and_the_first_finishes(tmp_path):
    """Two `make run`s at once on the embedded target: the second is refused at once, naming the
    first; the first, held in the middle of its batch meanwhile, finishes, and its tables equal the replay."""
    first, _ = _process(tmp_path, "--stage", "1", "--", *CRM)
    assert first.returncode == 0, _tail(first)
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
        state = pickle.load(source)
    _assert_crm_equals_replay(state, tmp_path / "landing", "the first run, beside a refused second one")
