"""`python -m python_hooks add-source`: the files it writes from raw Parquet footers, and what it
refuses. pyarrow and YAML only, no Spark (tests/pytest/test_add_source.py runs the result)."""

from __future__ import annotations

import datetime as dt
import json
import logging
import shutil
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from click.testing import CliRunner

from python_hooks.sources import add_source, yml
from python_hooks.sources import model as request_model
from python_hooks.sources.model import AddSourceError
from sample_data import debezium, dms

PROJECT = Path(__file__).resolve().parents[3]
TS = pa.timestamp("us", tz="UTC")
ORDER = [
    ("store_id", pa.int32()),
    ("order_no", pa.int64()),
    ("gift note", pa.string()),
    ("Amount", pa.decimal128(12, 2)),
]


def write(path: Path, columns: list[tuple[str, pa.DataType]], rows: list[tuple]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    names = [name for name, _ in columns]
    arrays = [pa.array([row[i] for row in rows], typ) for i, (_, typ) in enumerate(columns)]
    pq.write_table(pa.Table.from_arrays(arrays, names=names), path)
    return path


def dms_files(landing: Path, schema: str = "shop", table: str = "store_order") -> Path:
    """A full load without Op, and a CDC file (Op first, AR_H_CHANGE_SEQ) in a date folder."""
    folder = landing / "dms" / schema / table
    at = dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc)
    write(
        folder / "LOAD00000001.parquet",
        [("last_update_time", TS), *ORDER],
        [(at, 1, 1, "a note", Decimal("1.50"))],
    )
    write(
        folder / "2026" / "11" / "02" / "20261102-091000000.parquet",
        [("Op", pa.string()), ("last_update_time", TS), *ORDER, ("AR_H_CHANGE_SEQ", pa.string())],
        [("U", at, 1, 1, None, Decimal("2.00"), "2" * 35)],
    )
    return folder


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "models").mkdir(parents=True)
    shutil.copy2(PROJECT / "dbt_project.yml", root)
    return root


def tree(root: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}


def load(path: Path):
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def run(project: Path, landing: Path, producer: str, *names: str, key: str, **options) -> request_model.Plan:
    return add_source.add_source(project, str(landing), producer, names, [key], **options)


def test_dms_source_and_models_hold_every_setting(project, tmp_path):
    landing = tmp_path / "landing"
    dms_files(landing)
    plan = run(project, landing, "dms", "shop", "store_order", key="store_id,order_no")
    staging, current = project / "models" / "staging" / "shop", project / "models" / "current_state" / "shop"
    assert sorted(w.path for w in plan.writes) == sorted(
        [
            staging / "_shop__sources.yml",
            staging / "stg_shop__store_order.sql",
            staging / "_shop__models.yml",
            current / "shop__store_order.sql",
            current / "_shop__models.yml",
        ]
    )
    assert all(w.action == "create" for w in plan.writes)

    (source,) = load(staging / "_shop__sources.yml")["sources"]
    assert source["name"] == "shop" and source["description"].startswith("TODO")
    assert source["schema"] == "parquet" and source["quoting"] == {"identifier": True}
    assert source["meta"] == {"cdc_producer": "dms", "dms_timestamp_column": "last_update_time"}
    assert source["config"] == {
        "loaded_at_field": "last_update_time",
        "freshness": {"warn_after": {"count": 12, "period": "hour"}, "error_after": {"count": 24, "period": "hour"}},
    }
    (table,) = source["tables"]
    assert table["name"] == "store_order"
    assert table["identifier"] == "{{ env_var('CDC_LANDING_ROOT') }}/dms/shop/store_order"
    assert table["description"].startswith("TODO: describe")
    # business columns only (not Op, last_update_time, AR_H_CHANGE_SEQ), as the files spell them
    assert [(c["name"], c["data_type"]) for c in table["columns"]] == [
        ("store_id", "int"),
        ("order_no", "bigint"),
        ("gift note", "string"),
        ("Amount", "decimal(12,2)"),
    ]
    assert all(c["description"].startswith("TODO: describe") for c in table["columns"])
    assert [c["name"] for c in table["columns"] if c.get("quote")] == ["gift note"]

    assert (staging / "stg_shop__store_order.sql").read_text() == "{{ stg_dms_changes('shop', 'store_order') }}\n"
    assert (current / "shop__store_order.sql").read_text() == (
        "{{ cdc_current_state('stg_shop__store_order', unique_key=['store_id', 'order_no']) }}\n"
    )

    (model,) = load(current / "_shop__models.yml")["models"]
    assert model["name"] == "shop__store_order"
    assert model["description"].startswith('{{ doc("current_state_model") }}')
    assert "one live `shop.store_order` row per `store_id`, `order_no`" in model["description"]
    assert model["data_tests"] == [
        {"unique_combination_of_columns": {"arguments": {"combination_of_columns": ["store_id", "order_no"]}}}
    ]
    columns = {c["name"]: c for c in model["columns"]}
    assert list(columns) == [
        "store_id",
        "order_no",
        "gift note",
        "amount",  # staging lower-cases every business column
        "_cdc_op",
        "_cdc_ts",
        "_cdc_seq",
        "_cdc_source_file",
        "_cdc_row_hash",
        "_cdc_applied_at",
    ]
    assert columns["store_id"]["data_tests"] == ["not_null"] == columns["order_no"]["data_tests"]
    assert "data_tests" not in columns["gift note"] and columns["gift note"]["quote"] is True
    assert columns["_cdc_op"]["description"] == '{{ doc("cdc_op") }}'
    assert columns["_cdc_op"]["data_tests"] == ["not_null", {"accepted_values": {"arguments": {"values": ["I", "U"]}}}]
    assert all(c["description"].strip() for c in model["columns"])

    (stg,) = load(staging / "_shop__models.yml")["models"]
    assert stg["name"] == "stg_shop__store_order"
    stg_columns = {c["name"]: c for c in stg["columns"]}
    assert stg_columns["_cdc_op"]["data_tests"][1] == {
        "accepted_values": {"arguments": {"values": ["I", "U", "D", "T"]}}
    }
    assert stg_columns["_cdc_seq"]["data_tests"][1] == {
        "expression_is_true": {"arguments": {"expression": "rlike '^[0-9]{35}$'"}}
    }


def test_a_single_key_is_unique_and_not_null(project, tmp_path):
    landing = tmp_path / "landing"
    dms_files(landing)
    run(project, landing, "dms", "shop", "store_order", key="ORDER_NO")
    (model,) = load(project / "models" / "current_state" / "shop" / "_shop__models.yml")["models"]
    assert "data_tests" not in model
    assert {c["name"]: c.get("data_tests") for c in model["columns"]}["order_no"] == ["unique", "not_null"]
    sql = (project / "models" / "current_state" / "shop" / "shop__store_order.sql").read_text()
    assert "unique_key=['order_no']" in sql


def test_a_key_with_a_space_is_quoted_everywhere(project, tmp_path):
    landing = tmp_path / "landing"
    dms_files(landing)
    run(project, landing, "dms", "shop", "store_order", key="store_id,gift note")
    current = project / "models" / "current_state" / "shop"
    assert "unique_key=['store_id', 'gift note']" in (current / "shop__store_order.sql").read_text()
    (model,) = load(current / "_shop__models.yml")["models"]
    assert model["data_tests"] == [
        {
            "unique_combination_of_columns": {
                "arguments": {"combination_of_columns": ["store_id", "gift note"], "quote_columns": True}
            }
        }
    ]
    gift = next(c for c in model["columns"] if c["name"] == "gift note")
    assert gift["quote"] is True and gift["data_tests"] == ["not_null"]


def test_refuses_to_overwrite_and_writes_nothing(project, tmp_path):
    landing = tmp_path / "landing"
    dms_files(landing)
    existing = project / "models" / "current_state" / "shop" / "shop__store_order.sql"
    existing.parent.mkdir(parents=True)
    existing.write_text("select 1\n")
    before = tree(project)
    with pytest.raises(AddSourceError, match="shop__store_order"):
        run(project, landing, "dms", "shop", "store_order", key="store_id,order_no")
    assert tree(project) == before


def test_refuses_a_second_time(project, tmp_path):
    landing = tmp_path / "landing"
    dms_files(landing)
    run(project, landing, "dms", "shop", "store_order", key="order_no")
    before = tree(project)
    with pytest.raises(AddSourceError, match=r"source shop\.store_order already exists in models/staging/shop/"):
        run(project, landing, "dms", "shop", "store_order", key="order_no")
    assert tree(project) == before


def test_refuses_a_key_missing_from_a_file(project, tmp_path):
    landing = tmp_path / "landing"
    folder = dms_files(landing)
    write(folder / "20261103-091000000.parquet", [("Op", pa.string()), ("last_update_time", TS)], [("D", None)])
    before = tree(project)
    with pytest.raises(AddSourceError) as refused:
        run(project, landing, "dms", "shop", "store_order", key="store_id,order_no")
    message = str(refused.value)
    assert "\n" not in message
    assert "'store_id'" in message and "shop.store_order" in message
    assert "20261103-091000000.parquet" in message and str(folder) in message
    assert tree(project) == before


@pytest.mark.parametrize("key", ["Op", "last_update_time", "AR_H_CHANGE_SEQ", "nope"])
def test_refuses_a_key_that_is_not_a_business_column(project, tmp_path, key):
    landing = tmp_path / "landing"
    dms_files(landing)
    with pytest.raises(AddSourceError, match=f"key column '{key}'"):
        run(project, landing, "dms", "shop", "store_order", key=key)


def test_refuses_a_folder_without_parquet_file(project, tmp_path):
    landing = tmp_path / "landing"
    with pytest.raises(AddSourceError, match="no Parquet file in .*/dms/shop/store_order"):
        run(project, landing, "dms", "shop", "store_order", key="id")
    (landing / "dms" / "shop" / "store_order").mkdir(parents=True)
    (landing / "dms" / "shop" / "store_order" / "notes.txt").write_text("x")
    with pytest.raises(AddSourceError, match="no Parquet file"):
        run(project, landing, "dms", "shop", "store_order", key="id")
    assert not (project / "models" / "staging").exists()


def test_refuses_files_without_the_timestamp_column(project, tmp_path):
    landing = tmp_path / "landing"
    write(landing / "dms" / "shop" / "t" / "LOAD00000001.parquet", [("id", pa.int64())], [(1,)])
    with pytest.raises(AddSourceError, match="no timestamp column 'last_update_time'.*--timestamp-column"):
        run(project, landing, "dms", "shop", "t", key="id")


def _entry(path: Path, source: str, table: str) -> tuple[dict, dict]:
    entry = next(s for s in load(path)["sources"] if s["name"] == source)
    return entry, next(t for t in entry["tables"] if t["name"] == table)


def _settings(entry: dict) -> dict:
    return {k: entry.get(k) for k in ("schema", "quoting", "meta", "config")}


@pytest.mark.parametrize(
    ("producer", "names", "key", "source", "table", "project_yml"),
    [
        ("dms", ("crm", "customer_master"), "customer_id", "crm", "customer_master", "crm/_crm__sources.yml"),
        ("debezium", (debezium.CUSTOMER,), "id", "salesdb", "customer", "salesdb/_salesdb__sources.yml"),
        ("debezium", (debezium.PRODUCT,), "product_id", "inventory", "product", "inventory/_inventory__sources.yml"),
    ],
)
def test_matches_the_project_own_entries(project, tmp_path, producer, names, key, source, table, project_yml):
    """From the sample producers' files, the settings and columns of the project's hand-written
    entries (DMS; Debezium flattened and envelope)."""
    landing = tmp_path / "landing"
    for stage in (1, 2):
        (dms if producer == "dms" else debezium).write_stage(landing, stage)
    run(project, landing, producer, *names, key=key)
    ours, our_table = _entry(project / "models" / "staging" / source / f"_{source}__sources.yml", source, table)
    theirs, their_table = _entry(PROJECT / "models" / "staging" / project_yml, source, table)
    assert _settings(ours) == _settings(theirs)
    assert our_table["identifier"] == their_table["identifier"]
    assert [(c["name"], c["data_type"]) for c in our_table["columns"]] == [
        (c["name"], c["data_type"]) for c in their_table["columns"]
    ]
    for model in (f"stg_{source}__{table}", f"{source}__{table}"):
        folder = "staging" if model.startswith("stg_") else "current_state"
        assert (project / "models" / folder / source / f"{model}.sql").read_text() == (
            PROJECT / "models" / folder / source / f"{model}.sql"
        ).read_text()


def test_debezium_names_and_shape(project, tmp_path):
    landing = tmp_path / "landing"
    debezium.write_stage(landing, 1)
    with pytest.raises(AddSourceError, match="--source-name"):
        add_source.build_request("debezium", ["customer"], ["id"])
    assert add_source.build_request("debezium", ["a.b.c.Orders"], ["id"]).source_name == "c"
    plan = run(project, landing, "debezium", debezium.CUSTOMER, key="id", source_name="shop", table_name="client")
    assert plan.raw.shape == "flattened" and [c.name for c in plan.raw.columns] == ["id", "name", "mktsegment"]
    (source,) = load(project / "models" / "staging" / "shop" / "_shop__sources.yml")["sources"]
    assert source["tables"][0]["identifier"] == "{{ env_var('CDC_LANDING_ROOT') }}/debezium/topics/" + debezium.CUSTOMER
    assert (project / "models" / "staging" / "shop" / "stg_shop__client.sql").read_text() == (
        "{{ stg_debezium_changes('shop', 'client') }}\n"
    )
    with pytest.raises(AddSourceError, match="key column 'sku' of inventory.product is not a column .*before/after"):
        run(project, landing, "debezium", debezium.PRODUCT, key="sku")


def test_an_existing_source_gets_the_table_appended(project, tmp_path):
    """A second table of an existing source goes into that source's entry (dbt would apply a second
    entry's source-level settings to its own tables only); every existing line is kept."""
    for folder in ("staging/crm", "current_state/crm"):
        shutil.copytree(PROJECT / "models" / folder, project / "models" / folder)
    before = tree(project)
    landing = tmp_path / "landing"
    dms.write_stage(landing, 1)
    shutil.copytree(landing / "dms" / "crm" / "customer_master", landing / "dms" / "crm" / "customer_copy")
    plan = run(project, landing, "dms", "crm", "customer_copy", key="customer_id")
    appended = {w.path for w in plan.writes if w.action == "append"}
    sources = project / "models" / "staging" / "crm" / "_crm__sources.yml"
    assert appended == {
        sources,
        project / "models" / "staging" / "crm" / "_crm__models.yml",
        project / "models" / "current_state" / "crm" / "_crm__models.yml",
    }
    for path in appended:
        assert path.read_text().startswith(before[path].decode()), f"{path}: an existing line changed"
    (crm,) = load(sources)["sources"]
    assert [t["name"] for t in crm["tables"]] == ["customer_master", "customer_address", "customer_copy"]
    assert crm["tables"][2]["columns"] == [
        {**c, "description": f"TODO: describe {c['name']}{' (key column)' if c['name'] == 'customer_id' else ''}."}
        for c in crm["tables"][0]["columns"]
    ]
    names = [m["name"] for m in load(project / "models" / "current_state" / "crm" / "_crm__models.yml")["models"]]
    assert names == ["crm__customer_master", "crm__customer_address", "crm__customer_copy"]

    # a Debezium table under the DMS source's name: refused, nothing written
    after = tree(project)
    debezium.write_stage(landing, 1)
    with pytest.raises(AddSourceError, match="source 'crm' .* is a dms source, this table is debezium"):
        run(project, landing, "debezium", debezium.CUSTOMER, key="id", source_name="crm")
    with pytest.raises(AddSourceError, match="reads the timestamp column 'last_update_time', not 'ts'"):
        run(
            project, landing, "dms", "crm", "customer_address", key="customer_id", table_name="x", timestamp_column="ts"
        )
    assert tree(project) == after


@pytest.mark.parametrize(
    "value", ["id", "gift note", "TODO: describe x.", "on", "null", "#1", " lead", "a'b\"c", "données", "x\ty", "1"]
)
def test_yaml_scalars_read_back(value):
    assert yaml.safe_load(f"k: {yml.yaml_str(value)}") == {"k": value}


def test_command_line(project, tmp_path, monkeypatch, caplog):
    from python_hooks.__main__ import main

    landing = tmp_path / "landing"
    dms_files(landing)
    monkeypatch.setenv("CDC_LANDING_ROOT", str(landing))
    args = ["add-source", "dms", "shop", "store_order", "--key", "store_id,order_no", "--project-dir", str(project)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("read the footers of 2 raw file(s) of dms table shop.store_order in ")
    assert f"CDC_LANDING_ROOT={landing}" in lines[0]
    assert "created  models/current_state/shop/shop__store_order.sql" in lines
    assert f"  dbt test --select stg_shop__store_order+ --project-dir {project}" in lines

    with caplog.at_level(logging.ERROR):
        again = CliRunner().invoke(main, args)
    assert again.exit_code == 1
    (refusal,) = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert refusal.startswith("add-source refused: source shop.store_order already exists")


def test_refuses_a_file_that_is_not_parquet(project, tmp_path):
    landing = tmp_path / "landing"
    folder = dms_files(landing)
    (folder / "20261104-091000000.parquet").write_bytes(b"not parquet")
    with pytest.raises(AddSourceError, match=r"shop\.store_order: cannot read the Parquet footer of .*20261104"):
        run(project, landing, "dms", "shop", "store_order", key="order_no")
    assert not (project / "models" / "staging").exists()


def _debezium_file(path: Path, table: pa.Table, connect_schema: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table.replace_schema_metadata({"kafka.connect.value.schema": json.dumps(connect_schema)}), path)


def test_debezium_named_types_and_a_table_of_the_other_shape_in_one_source(project, tmp_path):
    """Debezium's named temporal types, as the footer's Kafka Connect schema names them (the live capture's
    files; the Confluent sink's Avro schema says the same with `connect.name`), go to meta.debezium_types and
    the column gets the decoded type; an envelope table joins a flattened source with its own shape."""
    topics = tmp_path / "landing" / "debezium" / "topics"
    flat = pa.table(
        {
            "id": pa.array([1], pa.int32()),
            "born": pa.array([-3540], pa.int32()),
            "__op": ["c"],
            "__source_ts_ms": pa.array([1], pa.int64()),
        }
    )
    _debezium_file(
        topics / "pg.shop.person" / "partition=0" / "pg.shop.person+0+0000000000.snappy.parquet",
        flat,
        {
            "type": "struct",
            "fields": [
                {"type": "int32", "field": "id"},
                {"type": "int32", "name": "io.debezium.time.Date", "field": "born"},
            ],
        },
    )
    image = pa.struct([("line", pa.int64()), ("at", pa.int64())])
    envelope = pa.table(
        {
            "before": pa.array([None], image),
            "after": pa.array([{"line": 1, "at": 5}], image),
            "op": ["c"],
            "source": pa.array([{"ts_ms": 1, "lsn": 2}], pa.struct([("ts_ms", pa.int64()), ("lsn", pa.int64())])),
        }
    )
    at = {"type": "int64", "name": "io.debezium.time.MicroTimestamp", "field": "at"}
    image_schema = {"type": "struct", "fields": [{"type": "int64", "field": "line"}, at]}
    _debezium_file(
        topics / "pg.shop.line" / "partition=0" / "pg.shop.line+0+0000000000.snappy.parquet",
        envelope,
        {"type": "struct", "fields": [{**image_schema, "field": "before"}, {**image_schema, "field": "after"}]},
    )
    landing = tmp_path / "landing"
    person = run(project, landing, "debezium", "pg.shop.person", key="id")
    assert [(c.name, c.data_type, c.debezium_type) for c in person.raw.columns] == [
        ("id", "int", None),
        ("born", "date", "io.debezium.time.Date"),
    ]
    run(project, landing, "debezium", "pg.shop.line", key="line")
    (source,) = load(project / "models" / "staging" / "shop" / "_shop__sources.yml")["sources"]
    assert source["meta"]["debezium_shape"] == "flattened"
    tables = {table["name"]: table for table in source["tables"]}
    assert tables["person"]["meta"] == {"debezium_types": {"born": "io.debezium.time.Date"}}
    assert tables["line"]["meta"] == {
        "debezium_shape": "envelope",
        "cdc_unchanged_value": "__debezium_unavailable_value",  # its source struct has `lsn`: PostgreSQL's
        "debezium_types": {"at": "io.debezium.time.MicroTimestamp"},
    }
    assert [(c["name"], c["data_type"]) for c in tables["line"]["columns"]] == [("line", "bigint"), ("at", "timestamp")]


def _connect_source(connector: str, fields: list[str]) -> dict:
    return {
        "type": "struct",
        "name": f"io.debezium.connector.{connector}.Source",
        "field": "source",
        "fields": [{"type": "string", "field": name} for name in fields],
    }


@pytest.mark.parametrize(
    ("shape", "columns", "connect", "connector", "unchanged", "why"),
    [
        # the envelope's source schema, by name (the live capture's Connect schema)
        (
            "envelope",
            {"lsn": pa.int64()},
            [_connect_source("postgresql", ["lsn"])],
            "postgresql",
            "__debezium_unavailable_value",
            "names the source io.debezium.connector.postgresql.Source",
        ),
        # the same from the Confluent sink's Avro schema (connect.name)
        (
            "envelope",
            {"scn": pa.string()},
            [{"name": "source", "type": {"type": "record", "connect.name": "io.debezium.connector.oracle.Source"}}],
            "oracle",
            "__debezium_unavailable_value",
            "names the source io.debezium.connector.oracle.Source",
        ),
        # no schema in the footer: the source struct's fields
        ("envelope", {"file": pa.string(), "pos": pa.int64()}, None, "mysql", None, "source struct has file, pos"),
        ("envelope", {"change_lsn": pa.string()}, None, "sqlserver", None, "source struct has change_lsn"),
        # flattened: the __source_ fields add.fields copied
        ("flattened", {"__source_lsn": pa.int64()}, None, "postgresql", "__debezium_unavailable_value", "__source_lsn"),
        ("flattened", {"__source_scn": pa.string()}, None, "oracle", "__debezium_unavailable_value", "__source_scn"),
        # a type only PostgreSQL's connector writes
        (
            "flattened",
            {},
            [{"type": "string", "name": "io.debezium.data.Uuid", "field": "id"}],
            "postgresql",
            "__debezium_unavailable_value",
            "io.debezium.data.Uuid",
        ),
        # nothing tells
        ("flattened", {}, None, None, None, "name no Debezium connector"),
    ],
)
def test_add_source_knows_its_producer(project, tmp_path, shape, columns, connect, connector, unchanged, why):
    """The connector from the footers: the placeholder setting written for PostgreSQL and Oracle, none for
    MySQL and SQL Server; what was inferred and why printed; a flattened topic's truncates named unseen."""
    topic = "srv.db.thing"
    path = tmp_path / "landing" / "debezium" / "topics" / topic / "partition=0" / f"{topic}+0+0000000000.snappy.parquet"
    if shape == "flattened":
        data = {"id": pa.array(["a"]), "__op": ["c"], "__source_ts_ms": pa.array([1], pa.int64())}
        data.update({name: pa.array([None], typ) for name, typ in columns.items()})
        table = pa.table(data)
    else:
        image = pa.struct([("id", pa.string())])
        source_type = pa.struct([("ts_ms", pa.int64()), *columns.items()])
        table = pa.table(
            {
                "before": pa.array([None], image),
                "after": pa.array([{"id": "a"}], image),
                "op": ["c"],
                "source": pa.array([{"ts_ms": 1}], source_type),
            }
        )
    path.parent.mkdir(parents=True)
    metadata = {"kafka.connect.value.schema": json.dumps({"type": "struct", "fields": connect})} if connect else {}
    if connect and "record" in json.dumps(connect):
        metadata = {"parquet.avro.schema": json.dumps({"type": "record", "fields": connect})}
    pq.write_table(table.replace_schema_metadata(metadata), path)

    plan = run(project, tmp_path / "landing", "debezium", topic, key="id")
    assert (plan.raw.connector.connector.name if plan.raw.connector.connector else None) == connector
    (source,) = load(project / "models" / "staging" / "db" / "_db__sources.yml")["sources"]
    assert (source["tables"][0].get("meta") or {}).get("cdc_unchanged_value") == unchanged
    lines = add_source.summary(plan, project, str(tmp_path / "landing"), "local", PROJECT)
    (said,) = [line for line in lines if line.startswith("connector: ")]
    assert why in said
    assert ("cdc_unchanged_value" in said) == (unchanged is not None or connector is None)
    truncates = [line for line in lines if line.startswith("truncates not seen")]
    assert len(truncates) == (shape == "flattened")
    assert not truncates or "full envelope" in truncates[0]
