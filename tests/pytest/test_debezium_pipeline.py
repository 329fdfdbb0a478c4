"""Debezium Parquet (flattened and full envelope) -> staging -> current state, against the replay.

The same `cdc_current_state` materialization as DMS; every table compared whole with oracles/replay_debezium.py
after each stage."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from helpers.runs import assert_batch_log, assert_stage, assert_status, batch_log, record_stages
from helpers.tables import assert_same_table, snapshot_ids, table_rows
from oracles.replay_counts import debezium_counts
from oracles.replay_debezium import replay_topic
from sample_data import debezium

SELECT = ("--select", "staging.salesdb", "staging.inventory", "current_state.salesdb", "current_state.inventory")

# topic -> (current-state model, business columns)
MODELS = {
    "mysql.salesdb.customer": ("salesdb__customer", ["id", "name", "mktsegment"]),
    "mysql.salesdb.sales_order": (
        "salesdb__sales_order",
        ["order_id", "customer_id", "order_ts", "amount", "order_status"],
    ),
    "pg.inventory.product": ("inventory__product", ["product_id", "name", "price", "in_stock"]),
}


def relation(schema: str, model: str) -> str:
    return f"{schema}_current.{model}"


def all_actual(spark, schema: str) -> dict:
    return {
        topic: table_rows(
            spark, relation(schema, model), debezium.TOPICS[topic]["key"], [*columns, "_cdc_op", "_cdc_ts"]
        )
        for topic, (model, columns) in MODELS.items()
    }


def all_expected(landing: Path) -> dict:
    return {
        topic: replay_topic(debezium.topic_dir(landing, topic), spec["shape"], spec["key"])
        for topic, spec in debezium.TOPICS.items()
    }


@pytest.fixture(scope="module")
def lake(dbt, spark, tmp_path_factory):
    landing = tmp_path_factory.mktemp("debezium_landing")
    schema = "debezium_lake"
    stages = record_stages(
        dbt,
        spark,
        landing,
        schema,
        debezium.write_stage,
        debezium.STAGES,
        all_actual,
        all_expected,
        select=SELECT,
        status=True,
    )
    return {"landing": landing, "schema": schema, "stages": stages, "batch_log": batch_log(spark, schema)}


@pytest.mark.parametrize("stage", range(1, debezium.STAGES + 1))
def test_each_stage_equals_replay(lake, stage):
    assert_stage(lake["stages"], stage)


@pytest.mark.parametrize("topic", MODELS)
def test_batch_log_agrees_with_replay_counts(lake, topic):
    """cdc_batch_log: one row per stage's run, its counts equal to the replay's, batch by batch
    (re-deliveries, late events, the truncate and its older changes included)."""
    topic_dir = debezium.topic_dir(lake["landing"], topic)
    stage_files = [{p.name for p in lake["stages"][s]["written"] if topic_dir in p.parents} for s in lake["stages"]]
    spec = debezium.TOPICS[topic]
    expected = debezium_counts(topic_dir, spec["shape"], spec["key"], stage_files)
    assert_batch_log(lake["batch_log"][MODELS[topic][0]], expected, topic)
    assert_status(lake["stages"], MODELS[topic][0], expected, topic)


def test_seed_scenario_by_value(lake, spark):
    customers = table_rows(spark, relation(lake["schema"], "salesdb__customer"), ["id"], ["id", "name", "mktsegment"])
    assert len(customers) == 30
    assert max(k[0] for k in customers) == 32
    assert (27,) not in customers and (28,) not in customers
    for i in (29, 30):
        assert customers[(i,)]["name"] == f"Customer Name update {i}"
        assert customers[(i,)]["mktsegment"] == f"Market segment update {i}"


def test_truncate_removed_older_rows(lake, spark):
    products = table_rows(spark, relation(lake["schema"], "inventory__product"), ["product_id"], ["product_id"])
    assert set(products) == {(1,), (20,), (21,), (23,)}


def test_redelivered_file_changes_nothing(lake, dbt, spark):
    """At-least-once: a whole file delivered again (new offsets, same events) commits nothing."""
    schema, landing = lake["schema"], lake["landing"]
    folder = debezium.topic_dir(landing, "mysql.salesdb.customer") / "partition=0"
    first = sorted(folder.glob("*.parquet"))[1]
    model = relation(schema, "salesdb__customer")
    before = snapshot_ids(spark, model)
    shutil.copy(first, folder / "mysql.salesdb.customer+0+0000009000.snappy.parquet")
    assert dbt("run", *SELECT, landing=landing, schema=schema).success
    assert snapshot_ids(spark, model) == before
    assert_same_table(
        all_actual(spark, schema)["mysql.salesdb.customer"],
        all_expected(landing)["mysql.salesdb.customer"],
        "re-delivered file",
    )


def test_one_topic_alone_file_by_file(dbt, spark, schema, tmp_path):
    """A landing root holding only mysql.salesdb.customer files, built from each file as it lands."""
    full, only = tmp_path / "full", tmp_path / "only"
    topic = "mysql.salesdb.customer"
    for stage in range(1, debezium.STAGES + 1):
        for path in debezium.write_stage(full, stage):
            if topic not in path.name:
                continue
            destination = debezium.topic_dir(only, topic) / path.parent.name
            destination.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, destination / path.name)
            assert dbt("run", *SELECT, landing=only, schema=schema).success
            assert_same_table(
                all_actual(spark, schema)[topic],
                replay_topic(debezium.topic_dir(only, topic), "flat", ["id"]),
                f"after {path.name}",
            )
