"""Replays: at-least-once delivery, as producers really repeat themselves.

Every raw file of every DMS and Debezium sample table is delivered again under a new name (a DMS task
restarted, its full load included; a Kafka Connect sink re-reading the topics from offset 0, so every
file comes again with new offsets), once on the built tables and once more after a `--full-refresh`.
Each time: no commit on any current-state table (their snapshot lists are unchanged), and every table
equals the pure-Python replay of every raw file, the copies included.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from helpers.tables import assert_same_table, snapshot_ids, table_rows
from oracles.replay_debezium import replay_topic
from oracles.replay_dms import replay
from sample_data import debezium, dms

SELECT = ("--select", "staging.crm", "current_state.crm", "staging.salesdb", "current_state.salesdb")
TOPICS = {
    "salesdb__customer": (debezium.CUSTOMER, ["id"]),
    "salesdb__sales_order": (debezium.SALES_ORDER, ["order_id"]),
}


def _current(spark, schema: str) -> dict[str, dict]:
    tables = {}
    for table in dms.TABLES:
        relation = f"{schema}_current.crm__{table}"
        tables[table] = table_rows(spark, relation, ["customer_id"], [*dms.TABLES[table], "_cdc_op", "_cdc_ts"])
    for model, (_, key) in TOPICS.items():
        relation = f"{schema}_current.{model}"
        columns = [f.name for f in spark.table(relation).schema.fields if f.name in ("_cdc_op", "_cdc_ts")
                   or not f.name.startswith("_cdc_")]  # fmt: skip
        tables[model] = table_rows(spark, relation, key, columns)
    return tables


def _expected(landing: Path) -> dict[str, dict]:
    expected = {t: replay(landing / "dms" / "crm" / t, ["customer_id"]) for t in dms.TABLES}
    for model, (topic, key) in TOPICS.items():
        expected[model] = replay_topic(debezium.topic_dir(landing, topic), "flat", key)
    return expected


def _snapshots(spark, schema: str) -> dict[str, list[int]]:
    relations = [f"crm__{t}" for t in dms.TABLES] + list(TOPICS)
    return {r: snapshot_ids(spark, f"{schema}_current.{r}") for r in relations}


def _deliver_everything_again(landing: Path, round_: int) -> int:
    """Every file again under a new name: DMS `<name>-again<n>.parquet` (LOAD files stay LOAD files);
    Debezium `<topic>+<partition>+<offset + n * 1,000,000>`, as a sink re-reading from offset 0."""
    copies = 0
    for table in dms.TABLES:
        for path in sorted((landing / "dms" / "crm" / table).glob("*.parquet")):
            if "-again" not in path.stem:
                shutil.copy(path, path.with_name(f"{path.stem}-again{round_}.parquet"))
                copies += 1
    for topic, _ in TOPICS.values():
        for path in sorted(debezium.topic_dir(landing, topic).rglob("*.parquet")):
            name, partition, rest = path.name.split("+")
            offset = int(rest.split(".")[0])
            if offset < 1_000_000:
                new_offset = offset + round_ * 1_000_000
                shutil.copy(path, path.with_name(f"{name}+{partition}+{new_offset:010d}.snappy.parquet"))
                copies += 1
    return copies


@pytest.mark.nightly  # a redelivered file: test_dms_pipeline.py's and test_debezium_pipeline.py's in make test
def test_every_file_delivered_again_commits_nothing(dbt, spark, schema, tmp_path):
    landing = tmp_path / "landing"
    for stage in range(1, dms.STAGES + 1):
        dms.write_stage(landing, stage)
        debezium.write_stage(landing, stage)
        assert dbt.pipeline(*SELECT, landing=landing, schema=schema), f"stage {stage}"
    state = _current(spark, schema)
    for model, expected in _expected(landing).items():
        assert_same_table(state[model], expected, f"before the replays: {model}")

    for round_, refresh in ((1, False), (2, True)):
        if refresh:
            assert dbt.pipeline("--full-refresh", *SELECT, landing=landing, schema=schema)
        before = _snapshots(spark, schema)
        assert _deliver_everything_again(landing, round_) > 0
        assert dbt.pipeline(*SELECT, landing=landing, schema=schema), f"round {round_}"
        assert _snapshots(spark, schema) == before, f"round {round_}: a replay committed to a table"
        after = _current(spark, schema)
        for model, expected in _expected(landing).items():
            assert_same_table(
                after[model], expected, f"round {round_} ({'after a full refresh' if refresh else ''}): {model}"
            )
