"""The write paths of a batch (macros/cdc/merge.sql: cdc_write_path, cdc_merge_shuffles), on the embedded target.

The sample's tables are small, so every other test takes the 'merge' path with the table broadcast into
the MERGE. Here the same stages run twice more, each path forced by its setting:
- 'split' (CDC_ONE_MERGE_MAX_BYTES=0, a user's choice): new keys appended, rows that exist changed by a
  matched-only MERGE, both on a branch published in one fast-forward when a batch has both;
- the shuffled MERGE (CDC_MERGE_BROADCAST_MAX_BYTES=0), the path of every table above 32 MiB: one MERGE
  that is a shuffle join, with Spark's runtime bloom filter on the table's side (its scan threshold
  lowered for this session, so that it is injected into the sample's small tables too).
The sample's DMS and Debezium stages through `make run`'s code; after every stage each table equals its
pure-Python replay, and its batch-log row and the table that ends the run say the replay's counts; a batch
with both new and existing keys commits an append and then the MERGE on the split path, once otherwise."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

from bench.instrument import SqlProfile
from helpers.runs import assert_batch_log, batch_log
from helpers.tables import assert_same_table, table_rows
from oracles.replay_counts import debezium_counts, dms_counts
from oracles.replay_debezium import replay_topic
from oracles.replay_dms import replay
from python_hooks.commands.run import Progress
from python_hooks.project.meta import IGNORED_COUNTERS
from sample_data import debezium, dms

SELECT = ("--select", "staging.crm", "current_state.crm", "staging.salesdb", "current_state.salesdb")
DMS_KEY = ["customer_id"]
TOPICS = {  # topic -> (current-state model, business columns): a flattened topic and an envelope one
    "mysql.salesdb.customer": ("salesdb__customer", ["id", "name", "mktsegment"]),
    "mysql.salesdb.sales_order": (
        "salesdb__sales_order",
        ["order_id", "customer_id", "order_ts", "amount", "order_status"],
    ),
}


def _tables(spark, schema: str) -> dict[str, dict]:
    actual = {
        f"crm__{t}": table_rows(spark, f"{schema}_current.crm__{t}", DMS_KEY, [*dms.TABLES[t], "_cdc_op", "_cdc_ts"])
        for t in dms.TABLES
    }
    for topic, (model, columns) in TOPICS.items():
        key = debezium.TOPICS[topic]["key"]
        actual[model] = table_rows(spark, f"{schema}_current.{model}", key, [*columns, "_cdc_op", "_cdc_ts"])
    return actual


def _replays(landing: Path) -> dict[str, dict]:
    expected = {f"crm__{t}": replay(landing / "dms" / "crm" / t, DMS_KEY) for t in dms.TABLES}
    for topic, (model, _) in TOPICS.items():
        spec = debezium.TOPICS[topic]
        expected[model] = replay_topic(debezium.topic_dir(landing, topic), spec["shape"], spec["key"])
    return expected


def _snapshots(spark, relation: str) -> dict[int, tuple]:
    rows = spark.sql(f"select snapshot_id, committed_at, operation from {relation}.snapshots").collect()
    return {r.snapshot_id: (r.committed_at, r.operation) for r in rows}


PATHS = {  # path -> (environment, Spark settings for the session meanwhile)
    "split": ({"CDC_ONE_MERGE_MAX_BYTES": "0"}, {}),
    "shuffled": (
        {"CDC_MERGE_BROADCAST_MAX_BYTES": "0"},
        {"spark.sql.optimizer.runtime.bloomFilter.applicationSideScanSizeThreshold": "0"},
    ),
}


@pytest.fixture(scope="module", params=list(PATHS))
def lake(request, dbt, spark, tmp_path_factory):
    path = request.param
    landing = tmp_path_factory.mktemp(f"paths_{path}_landing")
    schema = f"paths_{path}_lake"
    models = [*(f"crm__{t}" for t in dms.TABLES), *(model for model, _ in TOPICS.values())]
    environ, settings = PATHS[path]
    saved = {key: spark.conf.get(key, None) for key in settings}
    with pytest.MonkeyPatch.context() as patch:
        for key, value in environ.items():
            patch.setenv(key, value)
        for key, value in settings.items():
            spark.conf.set(key, value)
        try:
            stages = _run_stages(dbt, spark, landing, schema, models)
        finally:
            for key, value in saved.items():
                if value is None:
                    spark.conf.unset(key)
                else:
                    spark.conf.set(key, value)
    return {"path": path, "landing": landing, "schema": schema, "stages": stages, "batch_log": batch_log(spark, schema)}


def _run_stages(dbt, spark, landing: Path, schema: str, models: list[str]) -> dict[int, dict]:
    stages = {}
    for stage in range(1, dms.STAGES + 1):
        before = {m: _snapshots(spark, f"{schema}_current.{m}") for m in models} if stage > 1 else {}
        written = [*dms.write_stage(landing, stage), *debezium.write_stage(landing, stage)]
        said = io.StringIO()
        # as `make run` runs: its progress lines, then the table that ends the run (commands/run.py: report)
        progress = Progress(stream=said)
        profile = SqlProfile()
        dbt._runner.callbacks.extend([progress, profile])
        try:
            with contextlib.redirect_stdout(said):
                ok = dbt.pipeline(*SELECT, landing=landing, schema=schema)
        finally:
            dbt._runner.callbacks.remove(progress)
            dbt._runner.callbacks.remove(profile)
        stages[stage] = {
            "success": ok,
            "written": written,
            "run_table": _run_table(said.getvalue(), models),
            # each statement's words, without dbt's query comment
            "statements": [
                (s.node, " ".join(re.sub(r"^\s*/\*.*?\*/", "", s.sql, flags=re.S).split()).lower())
                for s in profile.statements
            ],
        }
        if ok:
            stages[stage]["actual"] = _tables(spark, schema)
            stages[stage]["expected"] = _replays(landing)
            # the operations this run committed to each table, oldest first (compactions left out)
            stages[stage]["operations"] = {
                m: [
                    op
                    for snapshot, (_, op) in sorted(
                        _snapshots(spark, f"{schema}_current.{m}").items(), key=lambda item: item[1][0]
                    )
                    if snapshot not in before.get(m, {}) and op != "replace"
                ]
                for m in models
            }
    return stages


def _run_table(output: str, models: list[str]) -> dict[str, list[str]]:
    """model -> its cells in the run's table: inserted, updated, deleted, ignored, refused."""
    table = output[output.index("this run (") :].splitlines()[2:]
    return {cells[0]: cells[1:6] for cells in (line.split() for line in table) if cells and cells[0] in models}


def _stage_files(lake, folder: Path) -> list[set[str]]:
    return [{p.name for p in lake["stages"][s]["written"] if folder in p.parents} for s in lake["stages"]]


def _replay_counts(lake) -> dict[str, list[dict]]:
    landing = lake["landing"]
    counts = {}
    for table in dms.TABLES:
        folder = landing / "dms" / "crm" / table
        counts[f"crm__{table}"] = dms_counts(folder, DMS_KEY, _stage_files(lake, folder))
    for topic, (model, _) in TOPICS.items():
        spec = debezium.TOPICS[topic]
        folder = debezium.topic_dir(landing, topic)
        counts[model] = debezium_counts(folder, spec["shape"], spec["key"], _stage_files(lake, folder))
    return counts


@pytest.mark.parametrize("stage", range(1, dms.STAGES + 1))
def test_each_path_equals_the_replay_at_every_stage(lake, stage):
    recorded = lake["stages"][stage]
    assert recorded["success"], f"make run failed at stage {stage} on the {lake['path']} path"
    for model, expected in recorded["expected"].items():
        assert_same_table(recorded["actual"][model], expected, f"{lake['path']} path, stage {stage}, {model}")


def test_each_path_logs_the_replays_counts_and_commits_once_but_the_splits_append(lake):
    counts = _replay_counts(lake)
    split = lake["path"] == "split"
    mixed = 0
    for model, expected in counts.items():
        assert_batch_log(lake["batch_log"][model], expected, f"{lake['path']} path {model}")
        for stage, batch in enumerate(expected, start=1):  # the table that ends each run says the same
            ignored = sum(batch[name] for name in IGNORED_COUNTERS)
            wanted = [batch["rows_inserted"], batch["rows_updated"], batch["rows_deleted"], ignored, 0]
            said = lake["stages"][stage]["run_table"][model]
            assert said == [str(n) for n in wanted], (
                f"{model} stage {stage}: the run's table says {said}, replay {wanted}"
            )
        for stage in range(2, dms.STAGES + 1):
            batch = expected[stage - 1]
            if batch["truncates"]:  # a truncate deletes in a statement of its own
                continue
            operations = lake["stages"][stage]["operations"][model]
            changed = batch["rows_updated"] + batch["rows_deleted"] > 0
            if batch["rows_inserted"] and changed and split:  # new and existing keys: the append, then the MERGE
                mixed += 1
                assert len(operations) == 2 and operations[0] == "append", f"{model} stage {stage}: {operations}"
            else:
                assert len(operations) == (1 if batch["rows_inserted"] or changed else 0), (
                    f"{model} stage {stage}: {operations} for {batch}"
                )
    assert mixed or not split, "no batch of the sample had both new and existing keys: the branch was not exercised"


def test_only_the_shuffled_path_plans_its_merges_without_a_broadcast(lake):
    """Every MERGE into a current-state table is sent between the setting that stops a broadcast by
    estimated size and its reset on the shuffled path, and no statement of the split path changes it."""
    merges = 0
    shuffled = lake["path"] == "shuffled"
    for stage, recorded in lake["stages"].items():
        by_node = {}  # each node's statements in its order (the run's threads interleave them)
        for node, sql in recorded["statements"]:
            by_node.setdefault(node, []).append(sql)
        for node, statements in by_node.items():
            for index, sql in enumerate(statements):
                if not (node.startswith("model.") and sql.startswith("merge into")):
                    continue
                if "_current" not in sql.split(" as t ")[0]:
                    continue  # not a MERGE into a current-state table
                merges += 1
                around = (statements[index - 1] if index else "", statements[index + 1 : index + 2] or [""])
                wanted = (
                    "set spark.sql.autobroadcastjointhreshold = -1",
                    ["reset spark.sql.autobroadcastjointhreshold"],
                )
                if shuffled:
                    assert around == wanted, f"stage {stage}, {node}: the MERGE is sent between {around}"
        if not shuffled:
            changed = [sql for _, sql in recorded["statements"] if "autobroadcastjointhreshold" in sql]
            assert not changed, f"stage {stage}: the split path sent {changed}"
    assert merges, f"no MERGE ran on the {lake['path']} path"
