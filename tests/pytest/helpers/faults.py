"""What the two fault-injection suites share (test_faults.py on the embedded target,
test_faults_cluster.py on the cluster): the kill points, the process that is killed and the one that
recovers (helpers/fault_run.py, as a scheduler starts `make run`), the checks after the recovery, and
the report of each recovery run's seconds (target/faults/report.jsonl).

The checks read the tables through `Tables`: a dump the recovery process wrote (`Dumped`, the embedded
target) or the cluster's Thrift Server (helpers/cluster.py: `Cluster`)."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from helpers import parse_template
from helpers.paths import PROJECT, import_path
from helpers.tables import assert_same_table
from oracles.replay_counts import COUNTS, dms_counts
from oracles.replay_dms import replay
from sample_data import dms

# helpers/fault_run.py, run as a module on the import path pytest has (helpers.paths.import_path)
HELPER = ["-m", "helpers.fault_run"]
CRM = ("--select", "staging.crm", "current_state.crm")
REPORT = PROJECT / "target" / "faults" / "report.jsonl"

# point -> the table the kill is for, or None for the first that reaches it
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
# Points only the append + MERGE on a branch reaches on the embedded target (the 'split' path, a table
# above cdc_one_merge_max_bytes): there, run with CDC_ONE_MERGE_MAX_BYTES=0. Every other point is reached
# on the one-MERGE path of the embedded target; after_merge is killed on
# both. On the shared target a batch with new keys is written on a branch on either path: only the
# append's points (SPLIT_POINTS) need CDC_ONE_MERGE_MAX_BYTES=0 there.
BRANCH_POINTS = {"after_branch_created", "during_insert", "after_insert", "after_publish"}
SPLIT_POINTS = {"during_insert", "after_insert"}
BOTH_PATHS = {"after_merge"}
# Points where the killed run's batch of crm__customer_master was committed to main but not logged
# (its changes are in the table, its log row never written: `make run` records every batch after its
# build, python_hooks/commands/accounting.py); at a `during_*` point it may have been committed, when the
# statement finished before the kill (1 s).
COMMITTED_UNLOGGED = {"after_publish", "after_tombstones"}
COMMITTED_UNLOGGED_ONE_MERGE = {"after_merge"}

# What the batch log may say of a batch after stage 1's row (assert_batch_log_never_lies), in order:
EXACT = "applied, counted as the replay counts it"
REDELIVERED = "logged again by the next run: nothing applied, every change re-delivered"
ONE_ROW = frozenset({(EXACT,)})
# A batch a fault may have stopped anywhere: not committed (the next run applies it), committed but not
# logged (the next run logs it as re-delivered), or logged but not in the ledger (both).
ANY_REPAIR = frozenset({(EXACT,), (REDELIVERED,), (EXACT, REDELIVERED)})
# The other tables of a `make run` killed in its build: one it finished was committed but not recorded (the
# run records every batch after its build), one it had not reached is applied by the recovery.
KILLED_RUN_OTHERS = frozenset({(EXACT,), (REDELIVERED,)})


class Tables(Protocol):
    """Where the checks read a warehouse's tables (relations `<schema>_<layer>.<table>`)."""

    def columns(self, relation: str) -> list[str]: ...

    def table_rows(self, relation: str, key: list[str], columns: list[str]) -> dict[tuple, dict]: ...

    def records(self, relation: str) -> list[dict]: ...


class Dumped:
    """The tables of a dump (helpers/fault_run.py --dump), read as `Tables`."""

    def __init__(self, state: dict) -> None:
        self.state = state

    def columns(self, relation: str) -> list[str]:
        return list(self.state["tables"][relation]["columns"])

    def records(self, relation: str) -> list[dict]:
        table = self.state["tables"][relation]
        return [dict(zip(table["columns"], row, strict=True)) for row in table["rows"]]

    def table_rows(self, relation: str, key: list[str], columns: list[str]) -> dict[tuple, dict]:
        index = {name.lower(): i for i, name in enumerate(self.state["tables"][relation]["columns"])}
        rows = {}
        for row in self.state["tables"][relation]["rows"]:
            record = {c: row[index[c.lower()]] for c in columns}
            k = tuple(record[c] for c in key)
            assert k not in rows, f"{relation}: duplicate key {k}"
            rows[k] = record
        return rows


def fault_process(
    tmp_path: Path, environ: Mapping[str, str], schema: str, *args: str, kill_at: str | None = None
) -> tuple[subprocess.CompletedProcess, float]:
    """helpers/fault_run.py on the landing folder tmp_path/landing, in a process group of its own
    (a kill takes its embedded Spark JVM too), with `environ` (the target's); `kill_at`: CDC_KILL_AT of
    its last run, a `during_*` point killed 1 s after it is reached."""
    # CDC_COMPACTION_MIN_DELETED_ROWS=0: the sample's small tables are compacted for their share of deleted rows, so a
    # run reaches the point during_compaction (macros/cdc/maintenance.sql)
    environ = {
        "CDC_COMPACTION_MIN_DELETED_ROWS": "0",
        **environ,
        "PYTHONPATH": import_path(dict(environ)),
        "CDC_KILL_DELAY": "1",
    }
    environ.pop("CDC_KILL_AT", None)
    command = [sys.executable, *HELPER, "--landing", str(tmp_path / "landing"), "--schema", schema]
    target = tmp_path / f"target-{time.monotonic_ns()}"
    if environ.get("CDC_TARGET", "local") == "local" and "--land-to" not in args:
        parse_template.seed(target, schema, tmp_path / "landing", target_arg=None)  # the pytest run's one parse
    command += ["--target-path", str(target)]
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


def tail(done: subprocess.CompletedProcess) -> str:
    return (done.stdout[-3000:] + "\n" + done.stderr[-3000:]).strip()


def assert_killed(killed: subprocess.CompletedProcess, point: str) -> None:
    """The run killed itself at `point`, after stage 1's run."""
    assert killed.returncode == -signal.SIGKILL, f"expected a SIGKILL at {point}:\n{tail(killed)}"
    assert f"cdc: kill point {point.split(':')[0]} of " in killed.stdout, tail(killed)
    assert "fault_run: run 1 of 2 succeeded" in killed.stdout, "stage 1 was applied before the kill"


def recovered_seconds(recovered: subprocess.CompletedProcess, fault: str) -> float:
    """The recovery run (fault_run with no stage) succeeded: its seconds, as it measured them."""
    assert recovered.returncode == 0, f"the run after {fault} failed:\n{tail(recovered)}"
    return float(re.search(r"run 1 of 1 succeeded in ([0-9.]+) s", recovered.stdout).group(1))


def record(target: str, fault: str, seconds: float, **details) -> None:
    """One line of target/faults/report.jsonl: a fault on a target and its recovery run's seconds."""
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    with REPORT.open("a", encoding="utf-8") as report:
        line = {"target": target, "fault": fault, "recovery_run_seconds": round(seconds, 1), **details}
        report.write(json.dumps(line) + "\n")


def killed_batch(point: str, branch: bool) -> frozenset:
    """What the batch log may say of crm__customer_master's stage 2 batch when its run was killed at
    `point` (`branch`: on the append + MERGE on a branch)."""
    if point in COMMITTED_UNLOGGED or (not branch and point in COMMITTED_UNLOGGED_ONE_MERGE):
        return frozenset({(REDELIVERED,)})
    if point == "during_compaction":
        # After the batch's writes; on the sample's small tables its rewrite may end within the kill's delay (1 s),
        # so the kill may land in the run's accounting, after the batch log's INSERT, before the ledger's: the batch
        # is logged, then logged again by the next run as re-delivered (the cluster, 2026-12-05: the rewrite ended
        # 0.6 s after the point, the build 0.7 s, and the batch log's INSERT was on its way at the kill).
        return ANY_REPAIR
    if point.startswith("during_"):  # the statement may have finished before the kill
        return frozenset({(EXACT,), (REDELIVERED,)})
    return ONE_ROW


def assert_crm_equals_replay(tables: Tables, schema: str, landing: Path, label: str) -> None:
    """Every CRM current-state table equals the replay of every raw file: its own columns (an added
    one included), _cdc_op and _cdc_ts."""
    for table in dms.TABLES:
        relation = f"{schema}_current.crm__{table}"
        columns = [c.lower() for c in tables.columns(relation) if not c.startswith("_cdc_")]
        columns += ["_cdc_op", "_cdc_ts"]
        expected = replay(landing / "dms" / "crm" / table, ["customer_id"])
        expected = {k: {c: row.get(c) for c in columns} for k, row in expected.items()}
        assert_same_table(tables.table_rows(relation, ["customer_id"], columns), expected, f"{label}: {relation}")


def assert_ledger_lists_each_file_once(tables: Tables, schema: str, landing: Path) -> None:
    """Each CRM model's ledger rows name every raw file of its folder, once each."""
    ledger = tables.records(f"{schema}_cdc_meta.cdc_file_ledger")
    for table in dms.TABLES:
        names = sorted(Path(row["file_name"]).name for row in ledger if row["model_name"] == f"crm__{table}")
        landed = sorted(p.name for p in (landing / "dms" / "crm" / table).iterdir() if p.is_file())
        assert names == landed, f"crm__{table}: the ledger lists {names}, the folder holds {landed}"


def assert_batch_log_never_lies(
    tables: Tables,
    schema: str,
    landing: Path,
    scratch: Path,
    batches: Mapping[str, frozenset] = {},  # noqa: B006 - read only
    others: frozenset = ONE_ROW,
) -> None:
    """The batch log after stage 1, stage 2 (hit by a fault) and the recovery: per CRM model, stage 1's
    row equal to the replay's counts (tests/pytest/oracles/replay_counts.py), then stage 2's batch as
    one of `batches[model]` (else `others`) says: a row equal to the replay's counts, or a batch the
    faulty run committed but could not log, which the recovery logs as changing nothing (its changes
    re-delivered: the table already holds them). Never a row for what did not happen, never a batch
    applied twice."""
    log = sorted(tables.records(f"{schema}_cdc_meta.cdc_batch_log"), key=lambda r: r["started_at"])
    written = {stage: dms.write_stage(scratch / str(stage), stage) for stage in (1, 2)}
    for table in dms.TABLES:
        model = f"crm__{table}"
        logged = [row for row in log if row["model_name"] == model]
        stage_files = [{p.name for p in written[stage] if p.parent.name == table} for stage in (1, 2)]
        expected = dms_counts(landing / "dms" / "crm" / table, ["customer_id"], stage_files)
        assert [row["status"] for row in logged] == ["applied"] * len(logged), f"{model}: {logged}"
        counts = [{name: row[name] for name in COUNTS} for row in logged]
        assert counts and counts[0] == {name: expected[0][name] for name in COUNTS}, f"{model} stage 1: {counts}"
        kinds = []
        for count in counts[1:]:
            applied = count["rows_inserted"] + count["rows_updated"] + count["rows_deleted"]
            if count == {name: expected[1][name] for name in COUNTS}:
                kinds.append(EXACT)
            elif applied == 0 and count["ignored_redelivered"] > 0:
                assert count["change_events"] == expected[1]["change_events"], f"{model}: {count}"
                kinds.append(REDELIVERED)
            else:
                kinds.append(f"neither: logged {count}, replay {expected[1]}")
        allowed = batches.get(model, others)
        assert tuple(kinds) in allowed, f"{model} stage 2: logged {kinds}, expected one of {sorted(allowed)}"
