"""Schema evolution with real Spark and Iceberg: the Python hooks, then dbt, on changed raw files.

Each kind of source schema change: the seed's `status` column, new decimal/date columns, an upper-case
spelling, an int -> bigint promotion, a refused string -> int change that stops only its table,
hostile column names, and a plain `dbt run` without the hooks."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from bench.instrument import SqlProfile, normalise
from helpers.paths import PROJECT
from helpers.tables import assert_same_table, table_rows
from oracles.replay_debezium import replay_topic
from oracles.replay_dms import replay
from sample_data import debezium, dms, evolution

CRM = ("--select", "staging.crm", "current_state.crm")
SALESDB = ("--select", "staging.salesdb", "current_state.salesdb")


def columns_of(spark, relation: str) -> dict[str, str]:
    return {f.name: f.dataType.simpleString() for f in spark.table(relation).schema.fields}


def business_columns(spark, relation: str) -> list[str]:
    return [c for c in columns_of(spark, relation) if not c.startswith("_cdc_")]


def with_all_columns(expected: dict, columns: list[str]) -> dict:
    """Rows replayed from events written before a column existed read null for it."""
    return {k: {c: row.get(c) for c in columns} for k, row in expected.items()}


def evolution_log(spark, schema: str) -> list[tuple]:
    return sorted(
        (r.table_name, r.column_name, r.action, r.old_type, r.new_type)
        for r in spark.table(f"{schema}_cdc_meta.schema_evolution_log").collect()
    )


def assert_dms_matches(spark, schema: str, landing: Path, table: str) -> None:
    relation = f"{schema}_current.crm__{table}"
    columns = business_columns(spark, relation) + ["_cdc_op", "_cdc_ts"]
    expected = replay(landing / "dms" / "crm" / table, ["customer_id"])
    assert_same_table(
        table_rows(spark, relation, ["customer_id"], columns), with_all_columns(expected, columns), relation
    )


def test_seed_status_column(dbt, spark, schema, tmp_path):
    """MySQL: ADD COLUMN status NOT NULL; UPDATE customer SET status = 'Green'."""
    for stage in range(1, debezium.STAGES + 1):
        debezium.write_stage(tmp_path, stage)
    assert dbt.pipeline(*SALESDB, landing=tmp_path, schema=schema)
    evolution.mysql_status_column(tmp_path)
    assert dbt.pipeline(*SALESDB, landing=tmp_path, schema=schema)

    relation = f"{schema}_current.salesdb__customer"
    assert business_columns(spark, relation) == ["id", "name", "mktsegment", "status"]
    assert columns_of(spark, relation)["status"] == "string"
    rows = table_rows(spark, relation, ["id"], ["id", "name", "mktsegment", "status", "_cdc_op", "_cdc_ts"])
    assert len(rows) == 30 and {r["status"] for r in rows.values()} == {"Green"}
    expected = replay_topic(debezium.topic_dir(tmp_path, debezium.CUSTOMER), "flat", ["id"])
    assert_same_table(rows, with_all_columns(expected, list(next(iter(rows.values())))), "status evolution")
    assert (f"`{schema}_current`.`salesdb__customer`", "status", "add_column", None, "string") in evolution_log(
        spark, schema
    )


def test_new_decimal_and_date_columns_and_an_upper_case_spelling(dbt, spark, schema, tmp_path):
    for stage in (1, 2):
        dms.write_stage(tmp_path, stage)
    assert dbt.pipeline(*CRM, landing=tmp_path, schema=schema)
    evolution.dms_new_types(tmp_path)
    evolution.dms_upper_case_country(tmp_path)
    assert dbt.pipeline(*CRM, landing=tmp_path, schema=schema)

    master = f"{schema}_current.crm__customer_master"
    types = columns_of(spark, master)
    assert (types["credit_limit"], types["birth_date"]) == ("decimal(18,4)", "date")
    rows = table_rows(spark, master, ["customer_id"], ["customer_id", "credit_limit", "birth_date"])
    assert rows[(1,)]["credit_limit"] == Decimal("1234.5678") and rows[(1,)]["birth_date"] == dt.date(1990, 5, 17)
    assert rows[(24,)]["credit_limit"] == Decimal("99999999999999.9999")
    assert rows[(3,)]["credit_limit"] is None, "rows written before the column read null"
    assert_dms_matches(spark, schema, tmp_path, "customer_master")

    address = f"{schema}_current.crm__customer_address"
    assert business_columns(spark, address) == ["customer_id", "city", "country", "row_audit_ts"]
    assert table_rows(spark, address, ["customer_id"], ["customer_id", "country"])[(24,)]["country"] == "Kenya"
    assert_dms_matches(spark, schema, tmp_path, "customer_address")
    logged = [entry for entry in evolution_log(spark, schema) if "address" in entry[0]]
    assert logged == [], "COUNTRY is country: nothing to add"


def test_promotion_applies_and_a_refusal_stops_only_its_table(dbt, spark, schema, tmp_path, caplog):
    for stage in (1, 2):
        dms.write_stage(tmp_path, stage)
        debezium.write_stage(tmp_path, stage)
    select = ("--select", "staging.crm", "current_state.crm", "staging.salesdb", "current_state.salesdb")
    assert dbt.pipeline(*select, landing=tmp_path, schema=schema)
    address = f"{schema}_current.crm__customer_address"
    address_before = spark.table(address).collect()

    evolution.mysql_order_customer_bigint(tmp_path)
    evolution.dms_city_becomes_int(tmp_path)
    evolution.dms_new_types(tmp_path)
    assert not dbt.pipeline(*select, landing=tmp_path, schema=schema), "a refusal makes the run fail"

    messages = [r.getMessage() for r in caplog.records if r.getMessage().startswith("refused:")]
    assert len(messages) == 1, messages
    assert all(part in messages[0] for part in ("crm__customer_address", "city", "string", "int"))
    assert sorted(spark.table(address).collect()) == sorted(address_before), "the refused table is untouched"

    orders = f"{schema}_current.salesdb__sales_order"
    assert columns_of(spark, orders)["customer_id"] == "bigint"
    order = table_rows(spark, orders, ["order_id"], ["order_id", "customer_id", "order_status"])[(900,)]
    assert order == {"order_id": 900, "customer_id": 3_000_000_000, "order_status": "shipped"}
    expected = replay_topic(debezium.topic_dir(tmp_path, debezium.SALES_ORDER), "flat", ["order_id"])
    columns = ["order_id", "customer_id", "order_ts", "amount", "order_status", "_cdc_op", "_cdc_ts"]
    assert_same_table(table_rows(spark, orders, ["order_id"], columns), expected, "int -> bigint")
    assert (f"`{schema}_current`.`salesdb__sales_order`", "customer_id", "promote_type", "int", "bigint") in (
        evolution_log(spark, schema)
    )
    assert_dms_matches(spark, schema, tmp_path, "customer_master")  # the other tables built


def test_hostile_column_names(dbt, spark, schema, tmp_path):
    dms.write_stage(tmp_path, 1)
    assert dbt.pipeline(*CRM, landing=tmp_path, schema=schema)
    evolution.dms_hostile_names(tmp_path)
    assert dbt.pipeline(*CRM, landing=tmp_path, schema=schema)
    master = f"{schema}_current.crm__customer_master"
    assert business_columns(spark, master)[-4:] == [name.lower() for name in evolution.HOSTILE]
    row = table_rows(spark, master, ["customer_id"], ["customer_id", *evolution.HOSTILE])[(4,)]
    assert [row[c] for c in evolution.HOSTILE] == ["gold", 7, True, 1.5]
    assert_dms_matches(spark, schema, tmp_path, "customer_master")


@pytest.mark.parametrize("with_hooks", [False])
def test_plain_dbt_run_adds_a_new_column_too(dbt, spark, schema, tmp_path, with_hooks):
    """Without the hooks, on_schema_change=append_new_columns keeps the new column's data."""
    for stage in (1, 2):
        dms.write_stage(tmp_path, stage)
    assert dbt("run", *CRM, landing=tmp_path, schema=schema).success
    evolution.dms_new_types(tmp_path)
    assert dbt("run", *CRM, landing=tmp_path, schema=schema).success
    assert_dms_matches(spark, schema, tmp_path, "customer_master")
    assert columns_of(spark, f"{schema}_current.crm__customer_master")["credit_limit"] == "decimal(18,4)"


def view_kept(spark, view: str) -> bool:
    return any(row[0] == "test.kept" for row in spark.sql(f"show tblproperties {view}").collect())


def raw_rows(folder: Path) -> int:
    """Change events in a folder's raw files, from their Parquet footers (hidden files are not raw)."""
    return sum(
        pq.ParquetFile(path).metadata.num_rows
        for path in folder.rglob("*.parquet")
        if not any(part.startswith((".", "_")) for part in path.relative_to(folder).parts)
    )


def test_a_staging_view_is_built_again_only_when_its_raw_schema_changes(dbt, spark, schema, tmp_path):
    """`make run` leaves a staging view as it is while new raw files bring no schema change (the
    folder's footers are not merged again) and builds it again when they do; either way the view
    reads every raw file of the folder."""
    view = f"{schema}_staging.stg_crm__customer_master"
    folder = tmp_path / "dms" / "crm" / "customer_master"
    for stage in (1, 2):  # the full load, then CDC files: they add Op and AR_H_CHANGE_SEQ
        dms.write_stage(tmp_path, stage)
    assert dbt.pipeline(*CRM, landing=tmp_path, schema=schema)
    spark.sql(f"alter view {view} set tblproperties ('test.kept' = 'yes')")

    dms.write_stage(tmp_path, 3)
    assert dbt.pipeline(*CRM, landing=tmp_path, schema=schema)
    assert view_kept(spark, view), "same raw schema: the view is left as it is"
    assert spark.table(view).count() == raw_rows(folder) > 0
    assert_dms_matches(spark, schema, tmp_path, "customer_master")

    evolution.dms_new_types(tmp_path)
    assert dbt.pipeline(*CRM, landing=tmp_path, schema=schema)
    assert not view_kept(spark, view), "new raw columns: the view is built again"
    assert {"credit_limit", "birth_date"} <= set(columns_of(spark, view))
    assert spark.table(view).count() == raw_rows(folder)
    assert_dms_matches(spark, schema, tmp_path, "customer_master")


def test_one_listing_gives_every_iceberg_tables_columns_as_describe_does(spark, schema):
    """The hooks read a schema's columns from one `show table extended` (Warehouse.listed_columns), not one
    `describe` per table: each table's columns and Spark types equal describe's, also after an ALTER, with
    hostile names; a table whose types the listing does not spell (nested) is described, and only it."""
    from python_hooks.project.sql import quote_ident
    from python_hooks.project.warehouse import Warehouse

    name = f"{schema}_listing"
    spark.sql(f"create database {name}")
    hostile = ["b c, d", 'quo"te', "naïve", "x=1]"]
    plain = ", ".join(f"{quote_ident(c)} string" for c in hostile)
    spark.sql(
        f"create table {name}.flat (a int, e decimal(10,2), f timestamp, g timestamp_ntz, h date, i boolean,"
        f" j float, k double, l binary, m bigint, {plain}) using iceberg"
    )
    spark.sql(f"create table {name}.nested (a int, n struct<x:int>, o array<int>, p map<string,int>) using iceberg")
    spark.sql(f"alter table {name}.flat add column q int")
    spark.sql(f"alter table {name}.flat alter column a type bigint")

    def described(table: str) -> list[tuple[str, str]]:
        columns = []
        for row in spark.sql(f"describe table {name}.{table}").collect():
            if not row.col_name or row.col_name.startswith("#"):
                break
            columns.append((row.col_name, row.data_type))
        return columns

    with Warehouse.open(["--project-dir", str(PROJECT)]) as warehouse:
        asked = []
        query, records = warehouse.query, warehouse.records
        warehouse.query = lambda sql: asked.append(sql) or query(sql)
        warehouse.records = lambda sql: asked.append(sql) or records(sql)
        flat, nested = warehouse.columns(name, "flat"), warehouse.columns(name, "nested")
        assert warehouse.columns(name, "missing") is None
    assert flat == described("flat") and flat[0] == ("a", "bigint") and flat[-1] == ("q", "int")
    assert nested == described("nested")
    quoted = quote_ident(name)
    assert asked == [  # one listing; the nested table alone is described
        f"show tables in {quoted}",
        f"show table extended in {quoted} like '*'",
        f"describe table {quoted}.`nested`",
    ], asked


def test_the_listed_metadata_files_give_each_tables_state_as_spark_does(spark, schema):
    """The planned tables' states come from the metadata files one listing names (iceberg.states_from_metadata,
    no statement), equal to what Spark's metadata tables say (iceberg.table_states): main's snapshot, the other
    branches, the data bytes and the delete layout; a table with no snapshot yet has none."""
    from python_hooks.project import iceberg
    from python_hooks.project.sql import quoted_relation
    from python_hooks.project.warehouse import Warehouse

    name = f"{schema}_states"
    spark.sql(f"create database {name}")
    props = "tblproperties ('format-version' = '2', 'write.delete.mode' = 'merge-on-read')"
    for table in ("empty", "written", "branched"):
        spark.sql(f"create table {name}.{table} (id int, v string) using iceberg {props}")
    for table in ("written", "branched"):
        spark.sql(f"insert into {name}.{table} values (1, 'a'), (2, 'b'), (3, 'c')")
        spark.sql(f"delete from {name}.{table} where id = 2")
    spark.sql(f"alter table {name}.branched create branch cdc_batch_1_x")
    spark.sql(f"insert into {name}.branched values (4, 'd')")
    tables = ["empty", "written", "branched"]
    with Warehouse.open(["--project-dir", str(PROJECT)]) as warehouse:
        located = {t: warehouse.listed_metadata(name)[t] for t in tables}
        from_files = iceberg.states_from_metadata(located)
        from_spark = iceberg.table_states(warehouse, {t: quoted_relation(name, t) for t in tables})
    assert from_files == from_spark, (from_files, from_spark)
    assert from_files["empty"]["snapshot"] is None
    assert (
        from_files["branched"]["branches"] == ["cdc_batch_1_x"] and from_files["written"]["layout"]["deleted_rows"] == 1
    )


def view_rows(spark, view: str) -> list[tuple]:
    return sorted(
        tuple(r) for r in spark.sql(f"select order_id, customer_id, _cdc_op, _cdc_source_file from {view}").collect()
    )


def raw_order_rows(folder: Path) -> list[tuple]:
    """What the staging view must hold, from the raw files themselves (pyarrow: every type variant)."""
    rows = []
    ops = {"r": "I", "c": "I", "u": "U", "d": "D"}
    for path in folder.rglob("*.parquet"):
        if any(part.startswith((".", "_")) for part in path.relative_to(folder).parts):
            continue
        for row in pq.read_table(path, columns=["order_id", "customer_id", "__op"]).to_pylist():
            rows.append((row["order_id"], row["customer_id"], ops[row["__op"]], path.name))
    return sorted(rows)


def rename_new_files(folder: Path, prefix: str) -> None:
    """Gives the folder's files not renamed yet a name that starts with `prefix` (their Kafka suffix kept)."""
    for path in list(folder.rglob("*.parquet")):
        if prefix and not path.name.startswith(prefix):
            path.rename(path.with_name(prefix + path.name))


@pytest.mark.parametrize("prefix", ["", "l'été #1 +x "], ids=["plain_names", "hostile_names"])
def test_a_type_variant_view_is_left_as_it_is_while_files_of_the_new_type_land(dbt, spark, schema, tmp_path, prefix):
    """Once a promotion splits a folder's files into type variants, the staging view reads the files at the
    promoted types (the open group) as the folder less the other variant's files: a new file of the new type
    changes nothing in its SQL, so `make run` leaves the view as it is, and the view reads every raw file
    once, each at the promoted type. The other variant's files are left out by the name the folder lists,
    also when it holds a space, a quote, a `#`, a `+` or non-ASCII (Spark's own file name is URL-encoded)."""
    view = f"{schema}_staging.stg_salesdb__sales_order"
    folder = debezium.topic_dir(tmp_path, debezium.SALES_ORDER)
    for stage in (1, 2):
        debezium.write_stage(tmp_path, stage)
    evolution.mysql_order_customer_bigint(tmp_path)
    rename_new_files(folder, prefix)
    assert dbt.pipeline(*SALESDB, landing=tmp_path, schema=schema)
    assert view_rows(spark, view) == raw_order_rows(folder)
    spark.sql(f"alter view {view} set tblproperties ('test.kept' = 'yes')")

    evolution.mysql_order_customer_bigint(tmp_path, order_id=901, later=60)
    rename_new_files(folder, prefix)
    assert dbt.pipeline(*SALESDB, landing=tmp_path, schema=schema)
    assert view_kept(spark, view), "a file of the new type: the view is left as it is"
    assert view_rows(spark, view) == raw_order_rows(folder), "and it reads the new file"
    orders = f"{schema}_current.salesdb__sales_order"
    expected = replay_topic(folder, "flat", ["order_id"])
    columns = ["order_id", "customer_id", "order_ts", "amount", "order_status", "_cdc_op", "_cdc_ts"]
    assert_same_table(table_rows(spark, orders, ["order_id"], columns), expected, "the new type's files")


INVENTORY = ("--select", "staging.inventory", "current_state.inventory")


def raw_product_rows(folder: Path) -> list[tuple]:
    """A full envelope's events as its staging view must hold them, from the raw files (pyarrow: both types of
    `before`/`after`): the key, the new column (null before it existed), the operation and the file."""
    rows = []
    ops = {"r": "I", "c": "I", "u": "U", "d": "D", "t": "T"}
    for path in folder.rglob("*.parquet"):
        for record in pq.read_table(path).to_pylist():
            image = record["after"] or record["before"] or {}
            rows.append((image.get("product_id"), image.get("weight_g"), ops[record["op"]], path.name))
    return sorted(rows, key=lambda row: tuple((value is None, value) for value in row))


def test_an_envelope_view_is_left_as_it_is_while_files_of_its_new_schema_land(dbt, spark, schema, tmp_path):
    """A column added at a PostgreSQL source gives a full envelope's `before` and `after` a new field, so the
    topic's files hold two types of those structs. The files of the new schema (the open group) are read as the
    folder's catalog table, its structs declared with their field names quoted (Debezium's `source` has fields
    named as keywords, `schema` and `table`): a new file changes nothing in the view's SQL, `make run` leaves it as
    it is, and the view reads every raw file once. (Before, a struct kept the group a list of file names: the view
    was built again at every run, its SQL growing with the folder.)"""
    view = f"{schema}_staging.stg_inventory__product"
    folder = debezium.topic_dir(tmp_path, debezium.PRODUCT)
    for stage in range(1, debezium.STAGES + 1):
        debezium.write_stage(tmp_path, stage)
    evolution.pg_product_weight_column(tmp_path)
    assert dbt.pipeline(*INVENTORY, landing=tmp_path, schema=schema)

    def view_rows() -> list[tuple]:
        found = spark.sql(f"select product_id, weight_g, _cdc_op, _cdc_source_file from {view}").collect()
        return sorted((tuple(r) for r in found), key=lambda row: tuple((value is None, value) for value in row))

    assert view_rows() == raw_product_rows(folder)
    spark.sql(f"alter view {view} set tblproperties ('test.kept' = 'yes')")

    evolution.pg_product_weight_column(tmp_path, product_id=31, later=60)
    assert dbt.pipeline(*INVENTORY, landing=tmp_path, schema=schema)
    assert view_kept(spark, view), "a file of the new schema: the view is left as it is"
    assert view_rows() == raw_product_rows(folder), "and it reads the new file"
    products = f"{schema}_current.inventory__product"
    columns = ["product_id", "name", "price", "in_stock", "weight_g", "_cdc_op", "_cdc_ts"]
    expected = with_all_columns(replay_topic(folder, "envelope", ["product_id"]), columns)
    assert_same_table(table_rows(spark, products, ["product_id"], columns), expected, "the new schema's files")


def _describes(dbt, *build_args: str, landing: Path, schema: str) -> dict[str, int]:
    """A `make run`, and the `describe query` statements each of its dbt nodes sent (by node name)."""
    profile = SqlProfile()
    dbt._runner.callbacks.append(profile)
    try:
        assert dbt.pipeline(*build_args, landing=landing, schema=schema)
    finally:
        dbt._runner.callbacks.remove(profile)
    counts: dict[str, int] = {}
    for statement in profile.statements:
        if statement.node and normalise(statement.sql).startswith("describe query"):
            name = statement.node.rsplit(".", 1)[-1]
            counts[name] = counts.get(name, 0) + 1
    return counts


@pytest.mark.parametrize("shape", ["flattened", "envelope"])
def test_a_view_built_again_for_a_schema_change_asks_spark_only_its_open_groups_types(
    dbt, spark, schema, tmp_path, shape
):
    """The run after a source's schema change splits a folder's files into groups: the staging view is built
    again, and the table's batch reads the files of both groups. The hooks read every one of those files' footers,
    and hand each group's raw columns and struct fields in the run's plan (evolution/apply.py: group_columns; the
    flattened topic's older group holds files with and without a column added before): the view asks Spark only for
    the open group's column types, which it declares (one describe), and the batch asks nothing. The view and the
    table then equal the raw files."""
    if shape == "flattened":
        select, topic, staging, table = (
            SALESDB,
            debezium.SALES_ORDER,
            "stg_salesdb__sales_order",
            "salesdb__sales_order",
        )
        key, change = "order_id", evolution.mysql_order_customer_bigint
    else:
        select, topic, staging, table = INVENTORY, debezium.PRODUCT, "stg_inventory__product", "inventory__product"
        key, change = "product_id", evolution.pg_product_weight_column
    folder = debezium.topic_dir(tmp_path, topic)
    for stage in (1, 2):
        debezium.write_stage(tmp_path, stage)
    assert dbt.pipeline(*select, landing=tmp_path, schema=schema)
    if shape == "flattened":
        evolution.mysql_order_channel_column(tmp_path)
        assert dbt.pipeline(*select, landing=tmp_path, schema=schema)

    change(tmp_path)
    describes = _describes(dbt, *select, landing=tmp_path, schema=schema)
    assert describes.get(staging) == 1, describes
    assert describes.get(table, 0) == 0, describes

    if shape == "flattened":
        assert view_rows(spark, f"{schema}_staging.{staging}") == raw_order_rows(folder)
    else:
        found = spark.sql(f"select product_id, weight_g, _cdc_op, _cdc_source_file from {schema}_staging.{staging}")
        rows = sorted((tuple(r) for r in found.collect()), key=lambda row: tuple((v is None, v) for v in row))
        assert rows == raw_product_rows(folder)
    relation = f"{schema}_current.{table}"
    columns = [c for c in columns_of(spark, relation) if not c.startswith("_cdc_")] + ["_cdc_op", "_cdc_ts"]
    expected = with_all_columns(replay_topic(folder, shape if shape == "envelope" else "flat", [key]), columns)
    assert_same_table(table_rows(spark, relation, [key], columns), expected, relation)
