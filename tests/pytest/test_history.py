"""SCD2 on Iceberg: customer_snapshot, dim_customer, sales_order_status_history, fct_sales_order.

The DMS and Debezium sample stages land one by one, with a `dbt build` of these models (and of
everything they read, with the SCD2 data tests) after each; after every stage each SCD2 table is
compared whole with the pure-Python replay in oracles/replay_history.py. One lake for the module: the
later tests (rerun, full refresh, erasure, rebuilt snapshot) continue from the last stage."""

from __future__ import annotations

import copy
import io
import json
import os
from collections import Counter
from pathlib import Path

import pytest
import yaml

from helpers.paths import PROJECT
from helpers.tables import assert_same_table, snapshot_ids, table_rows
from oracles.replay_debezium import replay_topic
from oracles.replay_dms import replay as dms_replay
from oracles.replay_history import (
    CUSTOMER_ATTRIBUTES,
    OPEN_END,
    ORDER_ATTRIBUTES,
    UNKNOWN_MEMBER_FROM,
    CustomerSnapshot,
    joined_customers,
    order_history,
    version_at,
)
from python_hooks import personal_data as erasure
from sample_data import debezium, dms

MODELS = [
    "int_customer__joined",
    "customer_snapshot",
    "dim_customer",
    "sales_order_change_log",
    "sales_order_status_history",
    "fct_sales_order",
]
# These models and what they read; the staging and current-state data tests belong to other suites, and the
# dbt unit tests to test_dbt_unit_tests.py (make run leaves them out too).
SELECT = (
    "--select",
    "+fct_sales_order",
    "+dim_customer",
    "--exclude",
    "resource_type:test,path:models/staging",
    "resource_type:test,path:models/current_state",
    "--exclude-resource-type",
    "unit_test",
)
# Only these models (the current state stays as it is).
SELECT_MINE = ("--select", *MODELS)

DIM_COLUMNS = ["customer_sk", "customer_id", *CUSTOMER_ATTRIBUTES, "valid_from", "valid_to", "is_current", "is_deleted"]
HISTORY_COLUMNS = ["order_id", *ORDER_ATTRIBUTES, "valid_from", "valid_to", "is_current", "is_deleted", "_cdc_op"]
FCT_COLUMNS = ["order_id", "customer_sk", *ORDER_ATTRIBUTES, "order_status_valid_from", "is_deleted"]


def relation(schema: str, model: str) -> str:
    layer = {
        "int_customer__joined": "intermediate",
        "customer_snapshot": "snapshots",
        "dim_customer": "marts",
        "fct_sales_order": "marts",
    }.get(model, "history")
    return f"{schema}_{layer}.{model}"


def actual_dim(spark, schema: str) -> dict[tuple, dict]:
    return table_rows(spark, relation(schema, "dim_customer"), ["customer_id", "valid_from"], DIM_COLUMNS)


def actual_history(spark, schema: str) -> dict[tuple, dict]:
    return table_rows(
        spark, relation(schema, "sales_order_status_history"), ["order_id", "valid_from"], HISTORY_COLUMNS
    )


def actual_fct(spark, schema: str) -> dict[tuple, dict]:
    return table_rows(spark, relation(schema, "fct_sales_order"), ["order_id"], FCT_COLUMNS)


def actual_current_orders(spark, schema: str) -> dict[tuple, dict]:
    return table_rows(
        spark, f"{schema}_current.salesdb__sales_order", ["order_id"], ["order_id", *ORDER_ATTRIBUTES, "_cdc_ts"]
    )


def failures(result) -> list[str]:
    if result.result is None or not hasattr(result.result, "results"):
        return [str(result.exception)]
    return [
        f"{r.node.unique_id}: {r.status}: {r.message}"
        for r in result.result.results
        if str(r.status) not in ("success", "pass")
    ]


def expected_customer_sk(spark, dim_keys) -> dict[tuple, int]:
    """customer_sk computed here, in Spark SQL apart from the models: xxhash64 of the customer id and the
    version's start."""
    keys = [k for k in dim_keys if k[0] is not None]
    frame = spark.createDataFrame(keys, "customer_id bigint, valid_from timestamp")
    hashed = frame.selectExpr("customer_id", "valid_from", "xxhash64(customer_id, valid_from) as sk").collect()
    return {**{(r["customer_id"], r["valid_from"]): r["sk"] for r in hashed}, (None, UNKNOWN_MEMBER_FROM): -1}


def expected_fct(dim_rows: dict, sks: dict, history: dict) -> dict[tuple, dict]:
    fct = {}
    for (order_id, valid_from), version in history.items():
        if not version["is_current"]:
            continue
        covering = version_at(dim_rows, version["customer_id"], version["order_ts"])
        fct[(order_id,)] = {
            "order_id": order_id,
            "customer_sk": sks[covering] if covering else -1,
            **{name: version[name] for name in ORDER_ATTRIBUTES},
            "order_status_valid_from": valid_from,
            "is_deleted": version["is_deleted"],
        }
    return fct


@pytest.fixture(scope="module")
def lake(dbt, spark, tmp_path_factory):
    """Stages 1-4 landed one by one, `dbt build` after each; per stage, what the tables held and
    what the replay expects."""
    landing = tmp_path_factory.mktemp("history_landing")
    schema = "history_lake"
    snapshot = CustomerSnapshot()
    stages = {}
    for stage in range(1, dms.STAGES + 1):
        dms.write_stage(landing, stage)
        debezium.write_stage(landing, stage)
        result = dbt("build", *SELECT, landing=landing, schema=schema)
        snapshot.run(joined_customers(landing))
        expected_dim = copy.deepcopy(snapshot.dim_rows())
        stages[stage] = {
            "success": result.success,
            "failures": failures(result),
            "dim": actual_dim(spark, schema),
            "history": actual_history(spark, schema),
            "fct": actual_fct(spark, schema),
            "current_orders": actual_current_orders(spark, schema),
            "expected_dim": expected_dim,
            "expected_history": order_history(landing),
            "expected_orders": replay_topic(debezium.topic_dir(landing, debezium.SALES_ORDER), "flat", ["order_id"]),
            "key_events": {model: key_events(spark, schema, model, key) for model, key in KEY_EVENTS.items()},
            "table_versions": {r: table_versions(spark, f"{schema}_intermediate.{r}") for r in TABLE_MODELS},
        }
    return {"landing": landing, "schema": schema, "stages": stages, "snapshot": snapshot}


def table_versions(spark, relation: str) -> dict:
    """A table's snapshots, and whether the files of every snapshot it no longer has are gone."""
    snapshots = spark.sql(f"select snapshot_id from {relation}.snapshots").collect()
    kept = {r[0] for r in spark.sql(f"select file_path from {relation}.all_data_files").collect()}
    return {"snapshots": len(snapshots), "data_files_kept": kept}


# The staging models whose key events the snapshot source keeps (macros/snapshot/key_events.sql), with their keys.
KEY_EVENTS = {"crm__customer_master": "customer_id", "crm__customer_address": "customer_id", "salesdb__customer": "id"}
# Table models the stages build again at every stage (macros/spark/table.sql).
TABLE_MODELS = ("int_customer__joined", *(f"int_{model}_key_events" for model in KEY_EVENTS))


def key_events(spark, schema: str, model: str, key: str) -> dict[str, set]:
    """The rows of int_<model>_key_events, and what they must be: every event of the staging view (every raw
    file) compacted here, in Python: per key, its last insert/update and the deletes after it (every delete
    of a key with neither), and every truncate."""

    def rows(relation: str) -> list[tuple]:
        query = f"select `{key}`, _cdc_op, _cdc_ts, _cdc_seq from {relation}"
        return [tuple(r) for r in spark.sql(query).collect()]

    events = rows(f"{schema}_staging.stg_{model}")
    last = {}
    for k, op, ts, seq in events:
        if op in ("I", "U"):
            last[k] = max(last.get(k, (ts, seq)), (ts, seq))
    expected = {
        (k, op, ts, seq)
        for k, op, ts, seq in events
        if op == "T"
        or (op in ("I", "U") and last[k] == (ts, seq))
        or (op == "D" and (k not in last or (ts, seq) > last[k]))
    }
    return {"actual": set(rows(f"{schema}_intermediate.int_{model}_key_events")), "expected": expected}


STAGES = range(1, dms.STAGES + 1)


@pytest.mark.parametrize("stage", STAGES)
def test_each_stage_builds_and_passes_the_scd2_data_tests(lake, stage):
    recorded = lake["stages"][stage]
    assert recorded["success"], "\n".join(recorded["failures"])


@pytest.mark.parametrize("stage", STAGES)
def test_dim_customer_equals_replay(lake, spark, stage):
    recorded = lake["stages"][stage]
    expected = recorded["expected_dim"]
    sks = expected_customer_sk(spark, expected)
    expected = {k: {**row, "customer_sk": sks[k]} for k, row in expected.items()}
    assert_same_table(recorded["dim"], expected, f"stage {stage} dim_customer")


@pytest.mark.parametrize("stage", STAGES)
def test_key_events_hold_what_every_event_gives(lake, stage):
    """Each build adds only the files applied since the last to the key events of before: what it keeps
    equals what every raw file gives, at every stage (the first stage is a first build)."""
    for model, found in lake["stages"][stage]["key_events"].items():
        assert found["expected"], f"stage {stage}: {model} has no event"
        assert found["actual"] == found["expected"], (
            f"stage {stage} int_{model}_key_events: missing {sorted(found['expected'] - found['actual'], key=str)[:5]},"
            f" extra {sorted(found['actual'] - found['expected'], key=str)[:5]}"
        )


def test_a_table_model_keeps_the_version_its_last_build_replaced_and_no_older_one(lake):
    """A table model's build expires the versions it replaced when the table had two snapshots or more before it
    (macros/spark/table.sql: cdc_replaced_versions_due): after its first build one snapshot, then two, one, two.
    What Iceberg keeps is only what those snapshots need: the data files of every expired one are gone."""
    for relation in TABLE_MODELS:
        counts = [lake["stages"][stage]["table_versions"][relation]["snapshots"] for stage in STAGES]
        expected = [1]
        for _ in STAGES[1:]:
            expected.append(2 if expected[-1] == 1 else 1)
        assert counts == expected, f"{relation}: snapshots after each stage {counts}, the rule gives {expected}"
        kept = {
            Path(f.removeprefix("file:"))
            for f in lake["stages"][STAGES[-1]]["table_versions"][relation]["data_files_kept"]
        }
        on_disk = set(next(iter(kept)).parent.glob("*.parquet"))
        assert on_disk == kept, f"{relation}: data files no snapshot needs {sorted(on_disk - kept)[:3]}"


@pytest.mark.parametrize("stage", STAGES)
def test_sales_order_status_history_equals_replay(lake, stage):
    recorded = lake["stages"][stage]
    assert_same_table(recorded["history"], recorded["expected_history"], f"stage {stage} sales_order_status_history")


@pytest.mark.parametrize("stage", STAGES)
def test_history_agrees_with_the_current_state_at_each_run_boundary(lake, stage):
    """What a snapshot of salesdb__sales_order taken by this run would hold as current."""
    recorded = lake["stages"][stage]
    current = {k[0]: row for k, row in recorded["history"].items() if row["is_current"]}
    live = {order_id: row for order_id, row in current.items() if not row["is_deleted"]}
    as_current_state = {
        (order_id,): {"order_id": order_id, **{n: row[n] for n in ORDER_ATTRIBUTES}, "_cdc_ts": row["valid_from"]}
        for order_id, row in live.items()
    }
    assert_same_table(as_current_state, recorded["current_orders"], f"stage {stage} history vs current state")
    columns = ["order_id", *ORDER_ATTRIBUTES]
    assert_same_table(
        {k: {n: row[n] for n in columns} for k, row in as_current_state.items()},
        {k: {n: row[n] for n in columns} for k, row in recorded["expected_orders"].items()},
        f"stage {stage} history vs replay of the current state",
    )
    assert all((order_id,) not in recorded["current_orders"] for order_id, row in current.items() if row["is_deleted"])


@pytest.mark.parametrize("stage", STAGES)
def test_every_order_points_to_the_customer_version_valid_at_order_ts(lake, spark, stage):
    recorded = lake["stages"][stage]
    sks = expected_customer_sk(spark, recorded["expected_dim"])
    expected = expected_fct(recorded["expected_dim"], sks, recorded["expected_history"])
    assert_same_table(recorded["fct"], expected, f"stage {stage} fct_sales_order")
    # the data has both cases
    assert {row["customer_sk"] == -1 for row in recorded["fct"].values()} == ({True, False} if stage > 1 else {True})


def test_snapshot_runs_run_after_run_on_iceberg(lake, spark):
    """The second and later snapshot runs on Iceberg succeed (they used to fail in dbt-spark:
    dbt-labs/dbt-adapters#489)."""
    schema = lake["schema"]
    table = relation(schema, "customer_snapshot")
    assert all(lake["stages"][stage]["success"] for stage in STAGES)
    provider = {r[0]: r[1] for r in spark.sql(f"describe table extended {table}").collect()}.get("Provider")
    assert provider == "iceberg"
    # one commit per run, every run had changes: the first build and three MERGEs
    assert len(snapshot_ids(spark, table)) == dms.STAGES
    starts = {r[0] for r in spark.sql(f"select distinct date(dbt_valid_from) from {table}").collect()}
    assert len(starts) == dms.STAGES, "every stage's changes became versions"


def test_hard_cases_by_value(lake):
    stages = lake["stages"]
    history = {stage: stages[stage]["history"] for stage in STAGES}

    def statuses(stage, order_id):
        return [
            (row["order_status"], row["valid_from"], row["valid_to"])
            for (oid, _), row in sorted(history[stage].items())
            if oid == order_id
        ]

    # a late event between two versions: order 5's 'shipped' arrives in stage 3, after 'delivered'
    assert [s for s, _, _ in statuses(2, 5)] == ["placed", "delivered"]
    placed, shipped, delivered = statuses(3, 5)
    assert (placed[0], shipped[0], delivered[0]) == ("placed", "shipped", "delivered")
    assert placed[2] == shipped[1] and shipped[2] == delivered[1] and delivered[2] == OPEN_END
    # several changes in one file are several versions; a same-millisecond change is one
    assert [s for s, _, _ in statuses(2, 17)] == ["placed", "shipped", "delivered"]
    assert [s for s, _, _ in statuses(2, 18)] == ["cancelled"]
    # a re-delivered event is no new version; a delete of an unknown order is none at all
    assert [s for s, _, _ in statuses(4, 10)] == ["placed", "shipped", "delivered"]
    assert statuses(4, 999) == []
    # a deleted order ends with a deletion version that keeps its last status
    assert [
        (row["order_status"], row["is_deleted"], row["is_current"])
        for (oid, _), row in sorted(history[4].items())
        if oid == 16
    ][-1] == ("cancelled", True, True)

    dim = stages[4]["dim"]
    # customers 27 and 28 left the sales system (their only one) in stage 2: deletion versions
    # from the delete's commit time, keeping the last attributes
    for customer_id in (27, 28):
        versions = sorted((row for (cid, _), row in dim.items() if cid == customer_id), key=lambda r: r["valid_from"])
        assert [v["is_deleted"] for v in versions] == [False, True]
        assert versions[0]["valid_to"] == versions[1]["valid_from"] < OPEN_END
        assert versions[1]["sales_customer_name"] == f"Customer Name {customer_id}"
    # customer 22 lost its CRM rows in stage 4 but stays in the sales system: a new version, not a delete
    latest_22 = max((row for (cid, _), row in dim.items() if cid == 22), key=lambda r: r["valid_from"])
    assert latest_22["first_name"] is None and latest_22["sales_customer_name"] == "Customer Name 22"
    assert not latest_22["is_deleted"]


def test_rerun_without_new_data_changes_nothing(lake, dbt, spark):
    schema, landing = lake["schema"], lake["landing"]
    tables = ["customer_snapshot", "sales_order_change_log", "sales_order_status_history", "fct_sales_order"]
    commits = {t: snapshot_ids(spark, relation(schema, t)) for t in tables}
    before = (actual_dim(spark, schema), actual_history(spark, schema), actual_fct(spark, schema))
    result = dbt("build", *SELECT, landing=landing, schema=schema)
    assert result.success, "\n".join(failures(result))
    assert {t: snapshot_ids(spark, relation(schema, t)) for t in tables} == commits
    assert (actual_dim(spark, schema), actual_history(spark, schema), actual_fct(spark, schema)) == before


def test_full_refresh_keeps_every_customer_sk(lake, dbt, spark):
    schema, landing = lake["schema"], lake["landing"]
    before = (actual_dim(spark, schema), actual_history(spark, schema), actual_fct(spark, schema))
    result = dbt("build", "--full-refresh", *SELECT_MINE, landing=landing, schema=schema)
    assert result.success, "\n".join(failures(result))
    after = (actual_dim(spark, schema), actual_history(spark, schema), actual_fct(spark, schema))
    assert after[0] == before[0], "dim_customer (customer_sk included) changed"
    assert after[1] == before[1], "sales_order_status_history rebuilt differently"
    assert after[2] == before[2], "fct_sales_order rebuilt differently"


def test_every_column_is_documented(spark, lake):
    """Every column of these models and of the snapshot has a description in yml."""
    documented = {}
    for path in [*Path(PROJECT, "models").rglob("*.yml"), *Path(PROJECT, "snapshots").rglob("*.yml")]:
        spec = yaml.safe_load(path.read_text()) or {}
        for node in [*spec.get("models", []), *spec.get("snapshots", [])]:
            documented[node["name"]] = {c["name"] for c in node.get("columns", []) if c.get("description")}
    for model in MODELS:
        columns = {f.name for f in spark.table(relation(lake["schema"], model)).schema.fields}
        assert columns <= documented.get(model, set()), f"{model}: undocumented {sorted(columns - documented[model])}"


# ---------------------------------------------------------------- rectification
# On the same lake, after the tests above; before the erasure below (which also erases a rectified customer).

RECTIFIED = "12"  # an e-mail address in the CRM's full load and a later update; a name in the sales system
CORRECTION = {"email_id": "rectified.12@example.com", "name": "Rectified Name 12"}
ERASED_CORRECTION = {"email_id": "rectified.5@example.com"}  # customer 5 is rectified, then erased
# table (schema suffix, name) -> (subject column, {rectified column: new value}) as declared in the yml meta
RECTIFIED_COLUMNS = {
    ("current", "crm__customer_master"): ("customer_id", {"email_id": CORRECTION["email_id"]}),
    ("current", "salesdb__customer"): ("id", {"name": CORRECTION["name"]}),
    ("intermediate", "int_customer__joined"): (
        "customer_id",
        {"email_id": CORRECTION["email_id"], "sales_customer_name": CORRECTION["name"]},
    ),
    ("snapshots", "customer_snapshot"): (
        "customer_id",
        {"email_id": CORRECTION["email_id"], "sales_customer_name": CORRECTION["name"]},
    ),
}


def rectify(dbt, landing: Path, schema: str, key: str, changes: dict[str, str]):
    from python_hooks.project.warehouse import Warehouse

    parsed = dbt("parse", landing=landing, schema=schema)
    assert parsed.success
    with Warehouse.open(["--project-dir", str(PROJECT)]) as warehouse:
        return erasure.rectify(warehouse, parsed.result, "customer", [key], changes, "pytest: rectification 1")


def raw_values_of_file(path: Path, key: str) -> set[str]:
    """Every e-mail address and sales-system name of customer `key` in one raw file, read with pyarrow."""
    import pyarrow.parquet as pq

    values = set()
    for record in pq.ParquetFile(path).read().to_pylist():
        if str(record.get("customer_id", record.get("id"))) == key:
            values |= {record[c] for c in ("email_id", "name") if record.get(c) is not None}
    return values - {CORRECTION["email_id"], CORRECTION["name"]}


def raw_values_of(landing: Path, key: str) -> set[str]:
    return set().union(*(raw_values_of_file(path, key) for path in landing.rglob("*.parquet")))


@pytest.fixture(scope="module")
def rectified(lake, dbt, spark):
    schema, landing = lake["schema"], lake["landing"]
    tables = [t for t in lake_tables(spark, schema) if is_iceberg(spark, t)]
    before = {t: all_rows(spark, t) for t in tables}
    columns = {t: [c for c in spark.table(t).columns if c != "_cdc_applied_at"] for t in tables}
    old_values = raw_values_of(landing, RECTIFIED)
    assert any("@" in v for v in old_values) and f"Customer Name {RECTIFIED}" in old_values
    originals = {
        path: path.read_bytes()
        for path in landing.rglob("*.parquet")
        if not path.name.startswith((".", "_")) and raw_values_of_file(path, RECTIFIED)
    }
    report = rectify(dbt, landing, schema, RECTIFIED, CORRECTION)
    rectify(dbt, landing, schema, ERASED[0], ERASED_CORRECTION)
    return {
        "tables": tables,
        "before": before,
        "columns": columns,
        "old": old_values,
        "originals": originals,
        "report": report,
    }


def rectified_columns(schema: str, table: str):
    for (suffix, name), spec in RECTIFIED_COLUMNS.items():
        if table == f"{schema}_{suffix}.{name}":
            return spec
    return None


def with_correction(rows: Counter, columns: list[str], key_column: str, key: str, changes: dict) -> Counter:
    """The expected rows: the key's non-null values of the changed columns replaced."""
    position = columns.index(key_column)
    expected = Counter()
    for row, n in rows.items():
        if str(row[position]) == key:
            row = tuple(
                changes[c] if c in changes and value is not None else value
                for c, value in zip(columns, row, strict=True)
            )
        expected[row] += n
    return expected


def test_rectification_changes_the_subjects_values_everywhere_and_nothing_else(lake, rectified, spark):
    schema = lake["schema"]
    report = rectified["report"]
    assert report.rows["crm__customer_master.email_id"] == 1 and report.rows["customer_snapshot.email_id"] >= 2
    assert report.raw_files, "the raw files of customer 12 were rewritten"
    for table in rectified["tables"]:
        if table.endswith(("erasure_log", "erasure_register", "rectification_register")):
            continue
        expected = rectified["before"][table]
        spec = rectified_columns(schema, table)
        columns = rectified["columns"][table]
        if spec:
            expected = with_correction(expected, columns, spec[0], RECTIFIED, spec[1])
            if spec[0] == "customer_id" and "email_id" in columns:
                expected = with_correction(expected, columns, "customer_id", ERASED[0], ERASED_CORRECTION)
        assert all_rows(spark, table) == expected, f"{table}: not the rows before with the correction"
    # the current state against the replay of the rewritten raw files, and its old values
    landing = lake["landing"]
    replay = dms_replay(landing / "dms" / "crm" / "customer_master", ["customer_id"])
    assert replay[(int(RECTIFIED),)]["email_id"] == CORRECTION["email_id"]
    columns = [c for c in next(iter(replay.values())) if c != "_cdc_op"]
    actual = table_rows(spark, f"{schema}_current.crm__customer_master", ["customer_id"], columns)
    assert_same_table(actual, {k: {c: row[c] for c in columns} for k, row in replay.items()}, "crm__customer_master")


def test_no_file_or_retained_snapshot_holds_a_rectified_old_value(lake, rectified, spark, warehouse):
    import pyarrow.parquet as pq

    schema, landing, old = lake["schema"], lake["landing"], rectified["old"]
    files = list(warehouse.glob(f"{schema}_*.db/**/*.parquet")) + list(landing.rglob("*.parquet"))
    for path in files:
        for record in pq.ParquetFile(path).read().to_pylist():
            for name, value in record.items():
                assert not (isinstance(value, str) and value in old), f"{path}: {name} holds an old value"
    values = ", ".join(f"'{v}'" for v in sorted(old))
    for table in rectified["tables"]:
        spec = rectified_columns(schema, table)
        if spec is None:
            continue
        condition = " or ".join(f"{c} in ({values})" for c in spec[1])
        for snapshot in snapshot_ids(spark, table):
            found = spark.sql(f"select count(*) from {table} version as of {snapshot} where {condition}")
            assert found.collect()[0][0] == 0, f"{table} snapshot {snapshot} still returns an old value"


def test_the_rectification_is_logged_without_personal_data(lake, rectified, spark):
    schema, report = lake["schema"], rectified["report"]
    rows = spark.sql(f"select * from {schema}_cdc_meta.erasure_log where run_id = '{report.run_id}'").collect()
    assert len(rows) == 1 and rows[0]["action"] == "rectify"
    assert rows[0]["rows_changed"]["salesdb__customer.name"] == 1
    text = json.dumps(rows[0].asDict(), default=str)
    assert not any(v in text for v in [*rectified["old"], *CORRECTION.values()])
    register = spark.sql(f"select * from {schema}_cdc_meta.rectification_register").collect()
    assert {r["column_name"] for r in register} == {"email_id", "name"}
    assert not any(r["value_hash"] in (v, f"'{v}'") for r in register for v in rectified["old"])


# ---------------------------------------------------------------- erasure (right to be forgotten)
# On the same lake, after the tests above: the whole lakehouse as the sample builds it.

ERASED = ["5", "7", "27"]  # several changes; deleted in the CRM (a tombstone); left the sales system
# table (schema suffix, name) -> its subject column (as declared in the yml meta)
HOLDERS = {
    ("current", "crm__customer_master"): "customer_id",
    ("current", "crm__customer_address"): "customer_id",
    ("current", "salesdb__customer"): "id",
    ("current", "salesdb__sales_order"): "customer_id",
    ("intermediate", "int_customer__joined"): "customer_id",
    ("intermediate", "int_crm__customer_master_key_events"): "customer_id",
    ("intermediate", "int_crm__customer_address_key_events"): "customer_id",
    ("intermediate", "int_salesdb__customer_key_events"): "id",
    ("snapshots", "customer_snapshot"): "customer_id",
    ("history", "sales_order_change_log"): "customer_id",
    ("history", "sales_order_status_history"): "customer_id",
    ("marts", "fct_sales_order"): "customer_id",
}


def erased_values() -> set[str]:
    """Personal values only an erased customer has (e-mail addresses, sales-system names)."""
    values = set()
    for i in map(int, ERASED):
        for version in range(6):
            customer = dms._customer(i, version)
            values.add(customer["email_id"])
        values.add(f"Customer Name {i}")
    return values | set(ERASED_CORRECTION.values())


def lake_tables(spark, schema: str) -> list[str]:
    tables = []
    for (database,) in spark.sql("show databases").collect():
        if database == schema or database.startswith(f"{schema}_"):
            for row in spark.sql(f"show tables in {database}").collect():
                if not row["isTemporary"]:
                    tables.append(f"{database}.{row['tableName']}")
    return tables


def is_iceberg(spark, table: str) -> bool:
    rows = {r[0]: r[1] for r in spark.sql(f"describe table extended {table}").collect()}
    return rows.get("Provider") == "iceberg"


def all_rows(spark, table: str) -> Counter:
    frame = spark.table(table)
    columns = [c for c in frame.columns if c != "_cdc_applied_at"]
    return Counter(
        tuple(json.dumps(v, sort_keys=True, default=str) if isinstance(v, (list, dict)) else v for v in row)
        for row in frame.select(*[f"`{c}`" for c in columns]).collect()
    )


def without_erased(rows: Counter, columns: list[str], column: str | None) -> Counter:
    if column is None:
        return rows
    position = columns.index(column)
    return Counter({row: n for row, n in rows.items() if str(row[position]) not in ERASED})


def erase(dbt, landing: Path, schema: str):
    from python_hooks.project.warehouse import Warehouse

    parsed = dbt("parse", landing=landing, schema=schema)
    assert parsed.success
    with Warehouse.open(["--project-dir", str(PROJECT)]) as warehouse:
        return erasure.erase(warehouse, parsed.result, "customer", ERASED, "pytest: erasure request 1")


@pytest.fixture(scope="module")
def erased(lake, rectified, dbt, spark):
    """The lake before (every table's rows, the replays of the raw files) and after erasing ERASED."""
    schema, landing = lake["schema"], lake["landing"]
    tables = [t for t in lake_tables(spark, schema) if is_iceberg(spark, t)]
    before = {t: all_rows(spark, t) for t in tables}
    columns = {t: [c for c in spark.table(t).columns if c != "_cdc_applied_at"] for t in tables}
    replays = {
        "crm__customer_master": dms_replay(landing / "dms" / "crm" / "customer_master", ["customer_id"]),
        "crm__customer_address": dms_replay(landing / "dms" / "crm" / "customer_address", ["customer_id"]),
        "salesdb__customer": replay_topic(debezium.topic_dir(landing, debezium.CUSTOMER), "flat", ["id"]),
    }
    originals = {path: path.read_bytes() for path in landing.rglob("*.parquet") if not path.name.startswith((".", "_"))}
    report = erase(dbt, landing, schema)
    return {
        "tables": tables,
        "before": before,
        "columns": columns,
        "replays": replays,
        "originals": originals,
        "report": report,
        "rectified_old": rectified["old"],
        "rectified_originals": rectified["originals"],
    }


def holder_column(schema: str, table: str) -> str | None:
    for (suffix, name), column in HOLDERS.items():
        if table == f"{schema}_{suffix}.{name}":
            return column
    return None


def test_erasure_removes_the_subjects_rows_and_nothing_else(lake, erased, spark):
    schema = lake["schema"]
    report = erased["report"]
    assert report.rows["crm__customer_master"] > 0 and report.rows["salesdb__sales_order"] > 0
    for table in erased["tables"]:
        column = holder_column(schema, table)
        expected = without_erased(erased["before"][table], erased["columns"][table], column)
        if table.endswith("_cdc_meta.cdc_tombstones"):
            expected = Counter(
                {
                    row: n
                    for row, n in erased["before"][table].items()
                    if not (
                        row[0] in ("crm__customer_master", "crm__customer_address", "salesdb__customer")
                        and str(next(iter(json.loads(row[1]).values()))) in ERASED
                    )
                }
            )
        if table.endswith("_cdc_meta.rectification_register"):
            # the erased customer's corrections go with them; the rectified customer's stay
            hashes = {erasure.subject_hash(os.environ[erasure.SECRET_ENV], "customer", k) for k in ERASED}
            expected = Counter({row: n for row, n in erased["before"][table].items() if row[1] not in hashes})
            assert expected != erased["before"][table] and expected
        if table.endswith(("erasure_log", "erasure_register")):
            continue
        assert all_rows(spark, table) == expected, f"{table}: rows other than the erased subject's changed"
    # against the replays: the current state, the SCD2 dimension, the order history and the fact
    for model, replay in erased["replays"].items():
        key = "id" if model == "salesdb__customer" else "customer_id"
        columns = [c for c in next(iter(replay.values())) if c != "_cdc_op"]
        expected = {k: {c: row[c] for c in columns} for k, row in replay.items() if str(k[0]) not in ERASED}
        actual = table_rows(spark, f"{schema}_current.{model}", [key], columns)
        assert_same_table(actual, expected, f"{model} after the erasure")
    final = lake["stages"][dms.STAGES]
    sks = expected_customer_sk(spark, final["expected_dim"])
    dim = {k: {**row, "customer_sk": sks[k]} for k, row in final["expected_dim"].items() if str(k[0]) not in ERASED}
    correction = {"email_id": CORRECTION["email_id"], "sales_customer_name": CORRECTION["name"]}
    for key, row in dim.items():  # the rectification before the erasure: every version of customer 12
        if str(key[0]) == RECTIFIED:
            row.update({c: v for c, v in correction.items() if row[c] is not None})
    assert_same_table(actual_dim(spark, schema), dim, "dim_customer after the erasure")
    history = {k: row for k, row in final["expected_history"].items() if str(row["customer_id"]) not in ERASED}
    assert_same_table(actual_history(spark, schema), history, "sales_order_status_history after the erasure")
    kept_dim = {k: row for k, row in final["expected_dim"].items() if str(k[0]) not in ERASED}
    assert_same_table(actual_fct(spark, schema), expected_fct(kept_dim, sks, history), "fct_sales_order")


def test_no_retained_snapshot_returns_an_erased_row(lake, erased, spark):
    schema = lake["schema"]
    keys = ", ".join(ERASED)
    for table in erased["tables"]:
        column = holder_column(schema, table)
        if column is None:
            continue
        for snapshot in snapshot_ids(spark, table):
            found = spark.sql(f"select count(*) from {table} version as of {snapshot} where {column} in ({keys})")
            assert found.collect()[0][0] == 0, f"{table} snapshot {snapshot} still returns an erased row"


def test_no_parquet_file_holds_an_erased_key_or_value(lake, erased, warehouse):
    """Every row of every Parquet file of the lake's tables and of its landing root is read."""
    import pyarrow.parquet as pq

    schema, landing = lake["schema"], lake["landing"]
    values = erased_values() | {f'{{"{c}":{k}}}' for k in ERASED for c in ("customer_id", "id")}  # tombstone keys
    files = list(warehouse.glob(f"{schema}_*.db/**/*.parquet")) + list(landing.rglob("*.parquet"))
    assert len(files) > 20
    for path in files:
        # the subject's key columns: customer_id everywhere, id in the sales system's customer table
        keys = {"customer_id"} | (
            {"id"} if "salesdb.customer" in str(path) or "salesdb__customer" in str(path) else set()
        )
        # ParquetFile: the file alone (read_table would add the partition folder's column, model_name=...)
        for record in pq.ParquetFile(path).read().to_pylist():
            for name, value in record.items():
                assert not (isinstance(value, str) and value in values), f"{path}: {name} holds an erased value"
                assert not (name.lower() in keys and str(value) in ERASED), f"{path}: {name} holds an erased key"


def test_the_erasure_is_logged_without_personal_data(lake, erased, spark):
    schema = lake["schema"]
    report = erased["report"]
    rows = spark.sql(f"select * from {schema}_cdc_meta.erasure_log where run_id = '{report.run_id}'").collect()
    assert len(rows) == 1
    row = rows[0].asDict()
    assert row["subject"] == "customer" and row["reason"] == "pytest: erasure request 1"
    assert sorted(row["key_hashes"]) == sorted(report.key_hashes) and len(row["key_hashes"]) == len(ERASED)
    assert f"{schema}_current.salesdb__customer".replace(".", "`.`") in "`" + "`, `".join(
        row["tables_touched"]
    ) + "`" or any("salesdb__customer" in t for t in row["tables_touched"])
    assert row["rows_changed"]["crm__customer_master"] == report.rows["crm__customer_master"] > 0
    assert row["raw_files_rewritten"] and row["snapshots_expired"] > 0
    text = json.dumps(row, default=str)
    assert not any(k in text.replace(report.run_id, "") for k in (f'"{k}"' for k in ERASED))
    assert not any(value in text for value in erased_values())


def test_erased_subjects_stay_gone(lake, erased, dbt, spark):
    """A full refresh of every model, a late CDC file of an erased customer, a re-delivered old file."""
    schema, landing = lake["schema"], lake["landing"]
    result = dbt("build", "--full-refresh", *SELECT, landing=landing, schema=schema)
    assert result.success, "\n".join(failures(result))
    # a late DMS update and a Debezium update of an erased customer, and a new order of theirs
    master = landing / "dms" / "crm" / "customer_master"
    template = pq_table(sorted(p for p in master.rglob("2*.parquet"))[-1])
    late = template.slice(0, 1).to_pylist()[0]
    late.update({"Op": "U", "customer_id": int(ERASED[0]), "email_id": "late@example.com"})
    # and a late update of the rectified customer carrying an old e-mail address
    old_email = sorted(v for v in erased["rectified_old"] if "@" in v)[0]
    late_old = {**late, "customer_id": int(RECTIFIED), "email_id": old_email}
    write_like(template, [late, late_old], master / "20261130-120000000.parquet")
    customers = debezium.topic_dir(landing, debezium.CUSTOMER)
    newest = max(customers.rglob("*.parquet"), key=lambda p: int(p.name.split("+")[-1].split(".")[0]))
    template = pq_table(newest)
    late = {**template.slice(0, 1).to_pylist()[0], "id": int(ERASED[1]), "name": "Late Name", "__op": "u"}
    partition = newest.parent
    write_like(template, [late], partition / newest.name.replace(newest.name.split("+")[-1].split(".")[0], "900000"))
    # a re-delivered original (pre-erasure) file of the CRM under a new name
    original = next(
        p
        for p in sorted(erased["originals"])
        if p.parent == master
        and int(ERASED[0]) in pq_table(io.BytesIO(erased["originals"][p])).column("customer_id").to_pylist()
    )
    (master / "20261130-130000000.parquet").write_bytes(erased["originals"][original])
    # and the original (pre-rectification) files of the rectified customer, re-delivered
    for n, path in enumerate(p for p in sorted(erased["rectified_originals"]) if p.parent == master):
        (master / f"20261130-14{n:02d}00000.parquet").write_bytes(erased["rectified_originals"][path])
    result = dbt("build", *SELECT, landing=landing, schema=schema)
    assert result.success, "\n".join(failures(result))
    keys = ", ".join(ERASED)
    for table in erased["tables"]:
        column = holder_column(schema, table)
        if column:
            assert spark.sql(f"select count(*) from {table} where {column} in ({keys})").collect()[0][0] == 0, table
    # the rectified customer keeps the correction, in the staging view too
    for table, column in [
        (f"{schema}_current.crm__customer_master", "email_id"),
        (f"{schema}_intermediate.int_customer__joined", "email_id"),
        (f"{schema}_snapshots.customer_snapshot", "email_id"),
        (f"{schema}_staging.stg_crm__customer_master", "email_id"),
    ]:
        values = {r[0] for r in spark.sql(f"select {column} from {table} where customer_id = {RECTIFIED}").collect()}
        assert values == {CORRECTION["email_id"]}, f"{table}: {values}"
    final = lake["stages"][dms.STAGES]
    history = {k: row for k, row in final["expected_history"].items() if str(row["customer_id"]) not in ERASED}
    assert_same_table(actual_history(spark, schema), history, "sales_order_status_history after the late files")


def pq_table(path):
    import pyarrow.parquet as pq

    return pq.read_table(path)


def write_like(template, rows: list[dict], path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows, schema=template.schema), path)


def test_rebuilt_snapshot_keeps_the_current_customer_sk(lake, dbt, spark):
    """Even a snapshot dropped and rebuilt (history lost) numbers current versions as before:
    a version starts at a commit time, not at a run. Destructive: the module's last test."""
    schema, landing = lake["schema"], lake["landing"]
    current = {
        k[0]: row["customer_sk"]
        for k, row in actual_dim(spark, schema).items()
        if row["is_current"] and not row["is_deleted"] and k[0] is not None
    }
    spark.sql(f"drop table {relation(schema, 'customer_snapshot')}")
    # cautious: not the fct's relationships test, which the lost history breaks on purpose
    result = dbt(
        "build",
        "--select",
        "customer_snapshot",
        "dim_customer",
        "--indirect-selection",
        "cautious",
        landing=landing,
        schema=schema,
    )
    assert result.success, "\n".join(failures(result))
    rebuilt = {k[0]: row["customer_sk"] for k, row in actual_dim(spark, schema).items() if k[0] is not None}
    assert rebuilt == current
