"""The schema-evolution plan: pure functions over Arrow schemas and DESCRIBE output, no Spark."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fuzz.python_side import assert_worded
from python_hooks.commands.run import empty_file_refusals
from python_hooks.evolution.apply import (
    _existing_groups,
    column_signature,
    file_groups,
    group_columns,
    inspect_table,
    readable_as_table,
)
from python_hooks.evolution.footers import FooterCache
from python_hooks.evolution.plan import (
    ColumnChange,
    Plan,
    Refusal,
    SchemaShapeError,
    business_schema,
    decoded_schema,
    plan_schema_changes,
)
from python_hooks.evolution.types import UnsupportedTypeError, compare_types, normalize_type, spark_type
from python_hooks.landing.files import raw_files
from python_hooks.project.producers import METADATA_COLUMNS, debezium_decoded_types, is_metadata_column
from python_hooks.project.sql import quote_ident
from python_hooks.project.storage import location
from python_hooks.project.tables import CdcTable

TABLE = "`spark_catalog`.`crm`.`customer`"
CUSTOMER = [("id", "bigint"), ("name", "string"), ("country", "string"), ("_cdc_seq", "string")]


def plan(current, *fields: tuple[str, pa.DataType], **kwargs) -> Plan:
    return plan_schema_changes(TABLE, current, pa.schema(list(fields)), **kwargs)


# ------------------------------------------------------------------------------------- quote_ident


@pytest.mark.parametrize(
    ("name", "quoted"),
    [
        ("id", "`id`"),
        ("loyalty tier", "`loyalty tier`"),
        ("select", "`select`"),
        ("a.b", "`a.b`"),
        ("we`ird", "`we``ird`"),
        ("`", "````"),
        ("x`; DROP TABLE t; --", "`x``; DROP TABLE t; --`"),
        ("straße_größe", "`straße_größe`"),
        ("客户", "`客户`"),
    ],
)
def test_quote_ident(name: str, quoted: str) -> None:
    assert quote_ident(name) == quoted


def test_quote_ident_refuses_empty_name() -> None:
    with pytest.raises(ValueError, match="empty"):
        quote_ident("")


# -------------------------------------------------------------------------------------- spark_type


@pytest.mark.parametrize(
    ("arrow_type", "expected"),
    [
        (pa.int8(), "tinyint"),
        (pa.int16(), "smallint"),
        (pa.int32(), "int"),
        (pa.int64(), "bigint"),
        (pa.uint8(), "smallint"),
        (pa.uint16(), "int"),
        (pa.uint32(), "bigint"),
        (pa.uint64(), "decimal(20,0)"),
        (pa.float16(), "float"),
        (pa.float32(), "float"),
        (pa.float64(), "double"),
        (pa.decimal128(18, 4), "decimal(18,4)"),
        (pa.decimal128(38, 0), "decimal(38,0)"),
        (pa.decimal256(40, 10), "decimal(40,10)"),
        (pa.string(), "string"),
        (pa.large_string(), "string"),
        (pa.dictionary(pa.int32(), pa.string()), "string"),
        (pa.binary(), "binary"),
        (pa.large_binary(), "binary"),
        (pa.binary(16), "binary"),
        (pa.bool_(), "boolean"),
        (pa.date32(), "date"),
        (pa.date64(), "date"),
        (pa.timestamp("s"), "timestamp"),
        (pa.timestamp("ms"), "timestamp"),
        (pa.timestamp("us"), "timestamp"),
        (pa.timestamp("us", tz="Europe/Paris"), "timestamp"),
        (pa.list_(pa.int32()), "array<int>"),
        (pa.large_list(pa.string()), "array<string>"),
        (pa.map_(pa.string(), pa.decimal128(10, 2)), "map<string,decimal(10,2)>"),
        (
            pa.struct([("street", pa.string()), ("zip code", pa.int32()), ("tags", pa.list_(pa.string()))]),
            "struct<`street`:string,`zip code`:int,`tags`:array<string>>",
        ),
        (pa.struct([("a`b", pa.bool_())]), "struct<`a``b`:boolean>"),
        (
            pa.list_(pa.struct([("k", pa.map_(pa.string(), pa.list_(pa.int64())))])),
            "array<struct<`k`:map<string,array<bigint>>>>",
        ),
        (pa.null(), None),
        (pa.list_(pa.null()), None),
        (pa.struct([("a", pa.int32()), ("b", pa.null())]), None),
    ],
)
def test_spark_type(arrow_type: pa.DataType, expected: str | None) -> None:
    assert spark_type(arrow_type) == expected


@pytest.mark.parametrize(
    "arrow_type",
    [
        pa.time32("s"),
        pa.time64("us"),
        pa.duration("ms"),
        pa.timestamp("ns", tz="UTC"),
        pa.month_day_nano_interval(),
        pa.dictionary(pa.int8(), pa.int64()),
        pa.struct([]),
        pa.list_(pa.time64("us")),
    ],
)
def test_spark_type_refuses_types_spark_cannot_hold(arrow_type: pa.DataType) -> None:
    with pytest.raises(UnsupportedTypeError) as error:
        spark_type(arrow_type)
    inner = arrow_type.value_type if pa.types.is_list(arrow_type) else arrow_type
    assert str(inner) in str(error.value)


# ---------------------------------------------------------------------------------- normalize_type


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("DECIMAL(18, 4)", "decimal(18,4)"),
        ("decimal(18,4)", "decimal(18,4)"),
        ("decimal", "decimal(10,0)"),
        ("DECIMAL(12)", "decimal(12,0)"),
        ("NUMERIC(9, 2)", "decimal(9,2)"),
        ("INTEGER", "int"),
        ("Int", "int"),
        ("LONG", "bigint"),
        ("short", "smallint"),
        ("byte", "tinyint"),
        ("real", "float"),
        ("  string ", "string"),
        ("timestamp_ntz", "timestamp_ntz"),
        ("ARRAY< INTEGER >", "array<int>"),
        ("map<STRING, array<LONG>>", "map<string,array<bigint>>"),
        ("STRUCT<Street: STRING, `Zip Code`: INT>", "struct<street:string,zip code:int>"),
        ("struct<zip code:int,a:struct<b:decimal(5, 1)>>", "struct<zip code:int,a:struct<b:decimal(5,1)>>"),
        ("struct<`a``b`:boolean>", "struct<a`b:boolean>"),
        ("struct<>", "struct<>"),
    ],
)
def test_normalize_type(text: str, canonical: str) -> None:
    assert normalize_type(text) == canonical


def test_normalize_type_reads_what_spark_type_writes() -> None:
    nested = pa.struct([("Loyalty Tier", pa.string()), ("pts", pa.map_(pa.string(), pa.decimal128(9, 3)))])
    assert normalize_type(spark_type(nested)) == "struct<loyalty tier:string,pts:map<string,decimal(9,3)>>"


def test_normalize_type_never_raises_on_text_it_cannot_parse() -> None:
    # DESCRIBE may truncate a wide struct; the text is still normalized, not an error.
    assert normalize_type("STRUCT<a: INT, ... 30 more fields>") == "struct<a:int,...30morefields>"


# ----------------------------------------------------------------------------------- compare_types


@pytest.mark.parametrize(
    ("table_type", "incoming", "relation"),
    [
        ("int", "int", "same"),
        ("INTEGER", "int", "same"),
        ("int", "bigint", "promote"),
        ("bigint", "int", "narrower"),
        ("bigint", "smallint", "narrower"),
        ("float", "double", "promote"),
        ("double", "float", "narrower"),
        ("decimal(10,2)", "decimal(12,2)", "promote"),
        ("decimal(12,2)", "decimal(10,2)", "narrower"),
        ("decimal(10,2)", "decimal(10,3)", "refuse"),
        ("decimal(10,2)", "decimal(12,3)", "refuse"),
        ("string", "int", "refuse"),
        ("int", "string", "refuse"),
        ("int", "double", "refuse"),
        ("bigint", "decimal(20,0)", "refuse"),
        ("timestamp", "date", "refuse"),
        ("date", "timestamp", "refuse"),
        ("timestamp_ntz", "timestamp", "same"),
        ("struct<a:int>", "struct<`A`:int>", "same"),
        ("struct<a:bigint>", "struct<`a`:int>", "narrower"),
        ("struct<a:int>", "struct<`a`:bigint>", "refuse"),
        ("struct<a:int>", "struct<`a`:int,`b`:string>", "refuse"),
        ("struct<a:int,b:string>", "struct<`a`:int>", "refuse"),
        ("array<int>", "array<bigint>", "refuse"),
        ("array<bigint>", "array<int>", "narrower"),
        ("array<int>", "int", "refuse"),
        ("map<string,int>", "map<string,string>", "refuse"),
    ],
)
def test_compare_types(table_type: str, incoming: str, relation: str) -> None:
    assert compare_types(table_type, incoming).relation == relation


# ---------------------------------------------------------------------------------------- metadata


def test_metadata_columns() -> None:
    assert {"op", "ar_h_change_seq", "__op", "__source_ts_ms", "__deleted"} <= METADATA_COLUMNS
    for name in ["Op", "OP", "ar_h_change_seq", "AR_H_CHANGE_SEQ", "last_update_time", "LAST_UPDATE_TIME"]:
        assert is_metadata_column(name), name
    for name in ["__op", "__source_ts_ms", "__deleted", "__anything", "_cdc_seq", "_CDC_TS", "_cdc_new"]:
        assert is_metadata_column(name), name
    for name in ["id", "operator", "opt", "_cdc", "_id", "last_update_time2", "cdc_seq"]:
        assert not is_metadata_column(name), name
    assert is_metadata_column("last_updated_ts", "last_updated_ts")
    assert not is_metadata_column("last_update_time", "last_updated_ts")
    assert not is_metadata_column("last_update_time", None)


# --------------------------------------------------------------------------------- business_schema


def test_business_schema_dms() -> None:
    raw = pa.schema(
        [
            ("Op", pa.string()),
            ("id", pa.int64()),
            ("Country", pa.string()),
            ("last_update_time", pa.timestamp("us")),
            ("AR_H_CHANGE_SEQ", pa.string()),
            ("_cdc_source_file", pa.string()),
            ("balance", pa.decimal128(18, 4)),
        ]
    )
    assert business_schema(raw, "dms") == pa.schema(
        [("id", pa.int64()), ("Country", pa.string()), ("balance", pa.decimal128(18, 4))]
    )
    custom = business_schema(raw, "dms", timestamp_column="last_updated_ts")
    assert custom.names == ["id", "Country", "last_update_time", "balance"]


def test_business_schema_debezium_flattened() -> None:
    raw = pa.schema(
        [
            ("id", pa.int32()),
            ("email", pa.string()),
            ("last_update_time", pa.timestamp("ms")),
            ("__op", pa.string()),
            ("__source_ts_ms", pa.int64()),
            ("__deleted", pa.string()),
        ]
    )
    assert business_schema(raw, "debezium_flattened") == pa.schema(
        [("id", pa.int32()), ("email", pa.string()), ("last_update_time", pa.timestamp("ms"))]
    )


def test_business_schema_debezium_envelope() -> None:
    after = pa.struct([("id", pa.int32()), ("name", pa.string()), ("score", pa.float64())])
    before = pa.struct([("ID", pa.int32()), ("name", pa.string()), ("legacy_code", pa.string())])
    source = pa.struct([("ts_ms", pa.int64()), ("db", pa.string()), ("file", pa.string()), ("pos", pa.int64())])
    raw = pa.schema(
        [
            ("before", before),
            ("after", after),
            ("source", source),
            ("op", pa.string()),
            ("ts_ms", pa.int64()),
            ("transaction", pa.struct([("id", pa.string())])),
        ]
    )
    assert business_schema(raw, "debezium_envelope") == pa.schema(
        [("id", pa.int32()), ("name", pa.string()), ("score", pa.float64()), ("legacy_code", pa.string())]
    )


def test_business_schema_debezium_envelope_with_null_before_image() -> None:
    raw = pa.schema([("before", pa.null()), ("after", pa.struct([("id", pa.int64())])), ("op", pa.string())])
    assert business_schema(raw, "debezium_envelope") == pa.schema([("id", pa.int64())])


def test_business_schema_rejects_unknown_shapes() -> None:
    with pytest.raises(SchemaShapeError, match="after"):
        business_schema(pa.schema([("op", pa.string()), ("after", pa.string())]), "debezium_envelope")
    with pytest.raises(SchemaShapeError, match="after"):
        business_schema(pa.schema([("id", pa.int64()), ("__op", pa.string())]), "debezium_envelope")
    with pytest.raises(ValueError, match="kafka"):
        business_schema(pa.schema([("id", pa.int32())]), "kafka")  # type: ignore[arg-type]


# ------------------------------------------------------------------------------ plan_schema_changes


def test_table_not_created_yet_needs_no_plan() -> None:
    result = plan(None, ("id", pa.int64()), ("name", pa.string()))
    assert result == Plan(TABLE, (), (), ())
    assert result.ok
    assert result.changes == ()


def test_table_without_columns_gets_every_business_column() -> None:
    result = plan([], ("Op", pa.string()), ("id", pa.int64()), ("name", pa.string()))
    assert result.adds == (
        ColumnChange(TABLE, "id", "add_column", None, "bigint"),
        ColumnChange(TABLE, "name", "add_column", None, "string"),
    )
    assert result.promotions == ()
    assert result.ok


def test_new_columns_added_with_exact_types_in_incoming_order() -> None:
    address = pa.struct([("street", pa.string()), ("zip", pa.int32())])
    result = plan(
        CUSTOMER,
        ("balance", pa.decimal128(18, 4)),
        ("id", pa.int64()),
        ("birth_date", pa.date32()),
        ("signed_up_at", pa.timestamp("us", tz="UTC")),
        ("active", pa.bool_()),
        ("photo", pa.binary()),
        ("address", address),
        ("tags", pa.list_(pa.string())),
        ("attributes", pa.map_(pa.string(), pa.int64())),
    )
    assert [(c.column, c.new_type) for c in result.adds] == [
        ("balance", "decimal(18,4)"),
        ("birth_date", "date"),
        ("signed_up_at", "timestamp"),
        ("active", "boolean"),
        ("photo", "binary"),
        ("address", "struct<`street`:string,`zip`:int>"),
        ("tags", "array<string>"),
    ]
    assert [(r.column, r.new_type) for r in result.refusals] == [("attributes", "map<string,bigint>")]
    assert all(c.action == "add_column" and c.old_type is None and c.table == TABLE for c in result.adds)
    assert result.adds[0].sql() == f"ALTER TABLE {TABLE} ADD COLUMN `balance` decimal(18,4)"
    assert result.adds[5].sql() == (f"ALTER TABLE {TABLE} ADD COLUMN `address` struct<`street`:string,`zip`:int>")
    assert result.promotions == ()


def test_names_match_case_insensitively() -> None:
    result = plan(CUSTOMER, ("ID", pa.int64()), ("COUNTRY", pa.string()), ("Name", pa.string()))
    assert result.changes == ()
    assert result.ok


def test_several_spellings_of_one_new_column_count_once() -> None:
    result = plan(CUSTOMER, ("Tier", pa.string()), ("TIER", pa.string()), ("tier", pa.null()))
    assert result.adds == (ColumnChange(TABLE, "Tier", "add_column", None, "string"),)
    assert result.ok


def test_spellings_with_clashing_types_are_refused() -> None:
    result = plan(CUSTOMER, ("tier", pa.string()), ("TIER", pa.int32()))
    assert result.refusals[0].column == "tier"
    assert (result.refusals[0].old_type, result.refusals[0].new_type) == ("string", "int")
    assert "'TIER'" in result.refusals[0].reason


def test_spellings_widen_to_the_wider_type() -> None:
    result = plan([("id", "bigint")], ("qty", pa.int32()), ("QTY", pa.int64()))
    assert result.adds == (ColumnChange(TABLE, "qty", "add_column", None, "bigint"),)


def test_null_typed_columns_are_skipped() -> None:
    result = plan(CUSTOMER, ("nickname", pa.null()), ("tags", pa.list_(pa.null())), ("tier", pa.string()))
    assert [c.column for c in result.adds] == ["tier"]


def test_metadata_columns_are_never_added() -> None:
    result = plan(
        CUSTOMER,
        ("Op", pa.string()),
        ("AR_H_CHANGE_SEQ", pa.string()),
        ("last_update_time", pa.timestamp("us")),
        ("__op", pa.string()),
        ("__source_ts_ms", pa.int64()),
        ("__deleted", pa.string()),
        ("_cdc_seq", pa.int64()),  # also not compared: the table's _cdc_seq is a string
        ("_cdc_op", pa.string()),
        ("loyalty", pa.string()),
    )
    assert [c.column for c in result.adds] == ["loyalty"]
    assert result.ok


def test_other_timestamp_column_name() -> None:
    result = plan(CUSTOMER, ("last_updated_ts", pa.timestamp("us")), timestamp_column="last_updated_ts")
    assert result.changes == ()
    result = plan(CUSTOMER, ("last_update_time", pa.timestamp("us")), timestamp_column=None)
    assert [c.column for c in result.adds] == ["last_update_time"]


def test_int_to_bigint_is_promoted() -> None:
    result = plan([("id", "int"), ("qty", "INT")], ("id", pa.int32()), ("QTY", pa.int64()))
    assert result.promotions == (ColumnChange(TABLE, "qty", "promote_type", "int", "bigint"),)
    assert result.promotions[0].sql() == f"ALTER TABLE {TABLE} ALTER COLUMN `qty` TYPE bigint"
    assert result.adds == () and result.ok
    assert result.changes == result.promotions


def test_float_to_double_is_promoted() -> None:
    result = plan([("score", "float")], ("score", pa.float64()))
    assert result.promotions == (ColumnChange(TABLE, "score", "promote_type", "float", "double"),)


def test_decimal_precision_is_promoted() -> None:
    result = plan([("amount", "decimal(10,2)")], ("amount", pa.decimal128(12, 2)))
    assert result.promotions == (ColumnChange(TABLE, "amount", "promote_type", "decimal(10,2)", "decimal(12,2)"),)
    assert result.promotions[0].sql() == f"ALTER TABLE {TABLE} ALTER COLUMN `amount` TYPE decimal(12,2)"


@pytest.mark.parametrize(
    ("table_type", "arrow_type"),
    [
        ("bigint", pa.int32()),
        ("bigint", pa.int16()),
        ("decimal(12,2)", pa.decimal128(10, 2)),
        ("DECIMAL(12, 2)", pa.decimal128(12, 2)),
        ("double", pa.float32()),
        ("timestamp_ntz", pa.timestamp("us")),
        ("timestamp", pa.timestamp("ms", tz="UTC")),
        ("struct<street:string,zip:bigint>", pa.struct([("Street", pa.string()), ("zip", pa.int32())])),
    ],
)
def test_narrower_incoming_type_needs_nothing(table_type: str, arrow_type: pa.DataType) -> None:
    result = plan([("c", table_type)], ("c", arrow_type))
    assert result == Plan(TABLE, (), (), ())


def test_string_to_int_is_refused_with_a_useful_message() -> None:
    result = plan(CUSTOMER, ("country", pa.int32()), ("tier", pa.string()))
    assert not result.ok
    assert [c.column for c in result.adds] == ["tier"]  # the rest of the plan is still computed
    (refusal,) = result.refusals
    assert (refusal.table, refusal.column, refusal.old_type, refusal.new_type) == (
        TABLE,
        "country",
        "string",
        "int",
    )
    message = refusal.message()
    for part in [TABLE, "`country`", "string", "int", "new column", "staging model"]:
        assert part in message, part
    assert "dbt run --full-refresh --select customer" in message


@pytest.mark.parametrize(
    ("table_type", "arrow_type", "new_type"),
    [
        ("int", pa.string(), "string"),
        ("bigint", pa.float64(), "double"),
        ("decimal(10,2)", pa.decimal128(10, 3), "decimal(10,3)"),
        ("decimal(10,2)", pa.decimal128(14, 4), "decimal(14,4)"),
        ("timestamp", pa.date32(), "date"),
        ("bigint", pa.uint64(), "decimal(20,0)"),
        ("struct<a:int>", pa.struct([("a", pa.int32()), ("b", pa.string())]), "struct<a:int,b:string>"),
        ("struct<a:int>", pa.struct([("a", pa.int64())]), "struct<a:bigint>"),
        ("array<int>", pa.int32(), "int"),
    ],
)
def test_other_type_changes_are_refused(table_type: str, arrow_type: pa.DataType, new_type: str) -> None:
    result = plan([("c", table_type)], ("c", arrow_type))
    assert result.changes == ()
    assert [(r.column, r.old_type, r.new_type) for r in result.refusals] == [
        ("c", normalize_type(table_type), new_type)
    ]
    assert result.refusals[0].reason


def test_decimal_scale_change_names_the_scale() -> None:
    (refusal,) = plan([("amount", "decimal(10,2)")], ("amount", pa.decimal128(12, 3))).refusals
    assert "scale" in refusal.reason
    assert "decimal(10,2)" in refusal.message() and "decimal(12,3)" in refusal.message()


def test_unsupported_incoming_type_is_a_refusal() -> None:
    result = plan(CUSTOMER, ("opens_at", pa.time64("us")), ("tier", pa.string()))
    (refusal,) = result.refusals
    assert (refusal.column, refusal.old_type, refusal.new_type) == ("opens_at", None, "time64[us]")
    assert "opens_at" in refusal.message() and "time64[us]" in refusal.message()
    assert [c.column for c in result.adds] == ["tier"]


def test_an_unsupported_type_refuses_the_first_build_too() -> None:
    """A table not built yet plans no change, but a column Spark would read as something else (a duration as
    bigint) is refused as on a built table (`make fuzz` found a first build that took it: the table's column
    was bigint, its values the durations' counts of seconds)."""
    result = plan(None, ("id", pa.int64()), ("row_audit_ts", pa.duration("s")), ("tier", pa.string()))
    (refusal,) = result.refusals
    assert (refusal.column, refusal.old_type, refusal.new_type) == ("row_audit_ts", None, "duration[s]")
    assert (result.adds, result.promotions) == ((), ())
    assert plan(None, ("id", pa.int64()), ("tier", pa.string())) == Plan(TABLE, (), (), ())


@pytest.mark.parametrize("current", [None, CUSTOMER])
def test_a_map_column_is_refused_in_words(current) -> None:
    """Spark hashes no map, and a batch hashes every business column (`make fuzz` found a first build of a
    map column failing in Spark's words, DATATYPE_MISMATCH.HASH_MAP_TYPE)."""
    timestamps = pa.map_(pa.string(), pa.timestamp("us", tz="UTC"))
    nested = pa.list_(pa.struct([("map<", pa.int32()), ("m", pa.map_(pa.string(), pa.int32()))]))
    result = plan(current, ("id", pa.int64()), ("seen", timestamps), ("deep", nested), ("tier", pa.string()))
    assert [(r.column, r.new_type) for r in result.refusals] == [
        ("seen", "map<string,timestamp>"),
        ("deep", "array<struct<map<:int,m:map<string,int>>>"),
    ]
    assert "hash" in result.refusals[0].message() and "seen" in result.refusals[0].message()
    quoted = plan(current, ("id", pa.int64()), ("odd", pa.struct([("map<", pa.int32())])))
    assert quoted.refusals == ()


def test_columns_missing_from_the_files_are_kept() -> None:
    result = plan(CUSTOMER, ("id", pa.int64()))
    assert result == Plan(TABLE, (), (), ())


@pytest.mark.parametrize(
    ("name", "sql"),
    [
        ("loyalty tier", f"ALTER TABLE {TABLE} ADD COLUMN `loyalty tier` string"),
        ("select", f"ALTER TABLE {TABLE} ADD COLUMN `select` string"),
        ("we`ird", f"ALTER TABLE {TABLE} ADD COLUMN `we``ird` string"),
        ("x` string, y int; --", f"ALTER TABLE {TABLE} ADD COLUMN `x`` string, y int; --` string"),
        ("größe_客户", f"ALTER TABLE {TABLE} ADD COLUMN `größe_客户` string"),
    ],
)
def test_hostile_names_are_quoted(name: str, sql: str) -> None:
    (add,) = plan(CUSTOMER, (name, pa.string())).adds
    assert add.column == name
    assert add.sql() == sql


def test_hostile_name_in_a_promotion() -> None:
    result = plan([("Loyalty `Points`", "int")], ("loyalty `points`", pa.int64()))
    assert result.promotions[0].sql() == f"ALTER TABLE {TABLE} ALTER COLUMN `Loyalty ``Points``` TYPE bigint"


def test_refusal_message_names_the_model_of_a_quoted_table() -> None:
    refusal = Refusal("`cat`.`crm`.`stg.odd``name`", "c", "int", "string", "nope")
    assert "`dbt run --full-refresh --select stg.odd`name`" in refusal.message()
    assert "`dbt run --full-refresh --select customer`" in Refusal("crm.customer", "c", "int", "s", "x").message()


def test_column_change_rejects_unknown_action() -> None:
    with pytest.raises(ValueError, match="drop_column"):
        ColumnChange(TABLE, "c", "drop_column", None, "int")  # type: ignore[arg-type]


def test_debezium_columns_staging_decodes_are_planned_with_their_decoded_types():
    """A Debezium date (int32 days) and timestamps (int64 micros, ISO text) against a table that holds
    them as date and timestamp: nothing to do, nothing refused; a new decoded column is added as such."""
    raw = pa.schema([("id", pa.int64()), ("born", pa.int32()), ("at", pa.int64()), ("seen", pa.string())])
    decoded = debezium_decoded_types(
        {
            "debezium_types": {
                "BORN": "io.debezium.time.Date",
                "at": "io.debezium.time.MicroTimestamp",
                "seen": "io.debezium.time.ZonedTimestamp",
            }
        }
    )
    assert decoded == {"born": "date", "at": "timestamp", "seen": "timestamp"}
    incoming = decoded_schema(raw, decoded)
    plan = plan_schema_changes("t", [("id", "bigint"), ("born", "date"), ("at", "timestamp")], incoming)
    assert plan.refusals == ()
    assert [(c.column, c.action, c.new_type) for c in plan.changes] == [("seen", "add_column", "timestamp")]
    with pytest.raises(ValueError, match="io.debezium.time.MicroTime"):
        debezium_decoded_types({"debezium_types": {"t": "io.debezium.time.MicroTime"}})


# ------------------------------------------------- inspect_table: the union of the files a run accepts


def _customer_table(folder) -> CdcTable:
    return CdcTable(
        model="customer",
        schema="crm",
        identifier="customer",
        staging_model="stg_crm__customer",
        source="crm.customer",
        folder=location(folder),
        producer="dms",
        timestamp_column="last_update_time",
        keys=("id",),
    )


def _parquet(path, schema: pa.Schema):
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({f.name: pa.nulls(1, f.type) for f in schema}, schema=schema), path)
    return path


CUSTOMER_NOW = [("id", "bigint"), ("name", "string"), ("_cdc_seq", "string")]


def _adds(found) -> list[tuple[str, str]]:
    return [(c.column, c.new_type) for c in found.plan.adds] if found.plan else []


def test_a_refused_file_adds_no_column_in_its_run_nor_after_it(tmp_path) -> None:
    """Issue 43's sequence: a file of another table (no 'id') lands in customer's folder: refused, and its
    columns are in no union; removed, then a new file of the same name: only the new file's columns."""
    folder = tmp_path / "crm" / "customer"
    _parquet(folder / "LOAD00000001.parquet", pa.schema([("id", pa.int64()), ("name", pa.string())]))
    _parquet(folder / "20261121-100000000.parquet", pa.schema([("Op", pa.string()), ("id", pa.int64())]))
    stranger = _parquet(
        folder / "20261121-110000000.parquet",
        pa.schema([("Op", pa.string()), ("order_id", pa.int64()), ("amount", pa.decimal128(10, 2))]),
    )
    table = _customer_table(folder)
    cache = FooterCache(tmp_path / "footers.json")

    refused = inspect_table(table, raw_files(folder, "dms"), cache, CUSTOMER_NOW)
    assert refused.problems == [
        f"raw file {stranger} has no key column 'id' (unique_key of model customer): its changes cannot be"
        " applied; fix the producer and replace the file [model customer, source crm.customer]"
    ]
    assert refused.union is not None and refused.union.names == ["id", "name", "Op"]
    cache.save()

    stranger.unlink()
    clean = inspect_table(table, raw_files(folder, "dms"), FooterCache(tmp_path / "footers.json"), CUSTOMER_NOW)
    assert (clean.problems, _adds(clean)) == ([], [])

    # A later file of the same name (the cache was not told of the removal: that run had nothing new)
    _parquet(stranger, pa.schema([("Op", pa.string()), ("id", pa.int64()), ("tier", pa.int16())]))
    later = inspect_table(table, raw_files(folder, "dms"), FooterCache(tmp_path / "footers.json"), CUSTOMER_NOW)
    assert (later.problems, _adds(later)) == ([], [("tier", "smallint")])


def test_a_conflicting_file_is_left_out_of_the_union(tmp_path) -> None:
    folder = tmp_path / "crm" / "customer"
    _parquet(folder / "LOAD00000001.parquet", pa.schema([("id", pa.int64()), ("name", pa.string())]))
    bad = _parquet(
        folder / "20261121-100000000.parquet",
        pa.schema([("Op", pa.string()), ("id", pa.int64()), ("name", pa.int32()), ("segment", pa.string())]),
    )
    found = inspect_table(_customer_table(folder), raw_files(folder, "dms"), FooterCache(tmp_path / "f.json"), None)
    assert len(found.problems) == 1 and str(bad) in found.problems[0] and "'name'" in found.problems[0]
    assert found.union is not None and found.union.names == ["id", "name"]


def test_a_nested_type_change_names_its_file(tmp_path) -> None:
    """A column that becomes a struct in a new file is refused naming that file, not only "the new files"
    (`make fuzz` found the refusal naming none: the footer's type was spelled with backquotes)."""
    folder = tmp_path / "crm" / "customer"  # the files that brought `name` as a string were removed since
    nested = _parquet(
        folder / "20261121-100000000.parquet",
        pa.schema([("Op", pa.string()), ("id", pa.int64()), ("name", pa.struct([("value", pa.string())]))]),
    )
    found = inspect_table(
        _customer_table(folder), raw_files(folder, "dms"), FooterCache(tmp_path / "f.json"), CUSTOMER_NOW
    )
    assert len(found.problems) == 1, found.problems
    assert f"(raw file {nested})" in found.problems[0] and "`name`" in found.problems[0], found.problems[0]


def test_applied_files_are_not_planned_and_one_changed_in_place_is_ignored_in_words(tmp_path) -> None:
    """The union planned is the new files' (issue 43): an applied file replaced with a column more brings no
    column, an applied file damaged in place refuses nothing; each gets one worded warning, and staging's
    types are the table's after the plan. A new file's column is added as before."""
    folder = tmp_path / "crm" / "customer"
    load = _parquet(folder / "LOAD00000001.parquet", pa.schema([("id", pa.int64()), ("name", pa.string())]))
    replaced = _parquet(folder / "20261121-100000000.parquet", pa.schema([("Op", pa.string()), ("id", pa.int64())]))
    damaged = _parquet(folder / "20261121-110000000.parquet", pa.schema([("Op", pa.string()), ("id", pa.int64())]))
    table = _customer_table(folder)
    applied = {load.name, replaced.name, damaged.name}
    cache = FooterCache(tmp_path / "footers.json")
    first = inspect_table(table, raw_files(folder, "dms"), cache, CUSTOMER_NOW, applied)
    assert (first.problems, first.ignored, _adds(first)) == ([], [], [])
    cache.save()

    _parquet(replaced, pa.schema([("Op", pa.string()), ("id", pa.int64()), ("tier", pa.string()), ("x", pa.int8())]))
    damaged.write_bytes(damaged.read_bytes()[:30])
    new = _parquet(folder / "20261122-090000000.parquet", pa.schema([("Op", pa.string()), ("id", pa.int32())]))
    found = inspect_table(
        table, raw_files(folder, "dms"), FooterCache(tmp_path / "footers.json"), CUSTOMER_NOW, applied
    )
    assert (found.problems, _adds(found)) == ([], [])
    assert len(found.ignored) == 2
    for file, warning in zip((replaced, damaged), found.ignored, strict=True):
        assert_worded(warning, str(file), "customer", "an applied file changed in place")
        assert "already applied" in warning and "new content is ignored" in warning
    assert found.left_out == (str(replaced), str(damaged))
    assert found.union is not None and found.union.names == ["Op", "id"]
    assert found.staged is not None and found.staged.names == ["id", "name", "Op"]
    assert sorted(found.file_types) == sorted([str(load), str(new)])
    assert found.business_types == {"id": "bigint", "name": "string"}

    # Without the ledger (a rebuild reads every file again), the replaced file is a new file like any other.
    _parquet(damaged, pa.schema([("Op", pa.string()), ("id", pa.int64())]))
    rebuilt = inspect_table(table, raw_files(folder, "dms"), FooterCache(tmp_path / "other.json"), CUSTOMER_NOW)
    assert (rebuilt.problems, rebuilt.ignored, _adds(rebuilt)) == ([], [], [("tier", "string"), ("x", "tinyint")])


def test_an_applied_file_emptied_in_place_refuses_nothing_and_is_ignored_in_words(tmp_path) -> None:
    """A raw file of 0 bytes is refused (an upload in progress or one that failed) unless its table's ledger
    lists it: an applied file emptied in place is never read again, like any applied file changed in place:
    one worded warning, left out of what staging reads, no refusal; a rebuild (no ledger) refuses it."""
    folder = tmp_path / "crm" / "customer"
    load = _parquet(folder / "LOAD00000001.parquet", pa.schema([("id", pa.int64()), ("name", pa.string())]))
    emptied = _parquet(folder / "20261121-100000000.parquet", pa.schema([("Op", pa.string()), ("id", pa.int64())]))
    table = _customer_table(folder)
    applied = {load.name, emptied.name}
    cache = FooterCache(tmp_path / "footers.json")
    inspect_table(table, raw_files(folder, "dms"), cache, CUSTOMER_NOW, applied)
    cache.save()

    emptied.write_bytes(b"")
    for state in ("footers.json", "other.json"):  # its footer read before, or never (a cache thrown away)
        found = inspect_table(table, raw_files(folder, "dms"), FooterCache(tmp_path / state), CUSTOMER_NOW, applied)
        assert (found.problems, _adds(found), found.left_out) == ([], [], (str(emptied),)), state
        assert len(found.ignored) == 1, found.ignored
        assert_worded(found.ignored[0], str(emptied), "customer", "an applied file emptied in place")
        assert "already applied" in found.ignored[0] and "(it has 0 bytes now)" in found.ignored[0]
        assert sorted(found.file_types) == [str(load)]

    uploading = folder / "20261122-090000000.parquet"
    uploading.write_bytes(b"")
    refusals = empty_file_refusals(table, applied)
    assert len(refusals) == 1 and str(uploading) in refusals[0] and "is empty (0 bytes)" in refusals[0], refusals
    rebuilt = empty_file_refusals(table)
    assert [str(emptied) in r for r in rebuilt] == [True, False] and str(uploading) in rebuilt[1], rebuilt


class _FileGroupsTable:
    """cdc_raw_file_groups as the hooks see it: its newest snapshot (Warehouse.meta_snapshots) and its rows."""

    meta_schema = "lake_cdc_meta"

    def __init__(self) -> None:
        self.snapshot, self.rows, self.reads = None, [], 0

    def meta_snapshots(self) -> dict[str, str | None]:
        return {"cdc_raw_file_groups": self.snapshot}

    def query(self, sql: str) -> list[tuple]:
        assert "`.`cdc_raw_file_groups` order by group_id" in sql
        self.reads += 1
        return list(self.rows)


def test_the_file_groups_are_read_again_only_after_a_commit_to_them(tmp_path) -> None:
    table, cache = _FileGroupsTable(), tmp_path / "state" / "groups.json"
    relation = "`lake_cdc_meta`.`cdc_raw_file_groups`"
    assert _existing_groups(table, relation, cache) == {} and table.reads == 0  # never written: nothing to read

    table.snapshot, table.rows = (
        "5",
        [("stg_a", 0, '["x.parquet"]', '{"c": "int"}'), ("stg_a", 1, '["y.parquet"]', None)],
    )
    first = {"stg_a": [(0, ["x.parquet"], '{"c": "int"}'), (1, ["y.parquet"], None)]}
    assert _existing_groups(table, relation, cache) == first and table.reads == 1
    assert _existing_groups(table, relation, cache) == first and table.reads == 1  # same snapshot: kept here

    table.snapshot, table.rows = "6", [("stg_b", 0, '["z.parquet"]', None)]  # another run wrote the table
    assert _existing_groups(table, relation, cache) == {"stg_b": [(0, ["z.parquet"], None)]} and table.reads == 2
    assert _existing_groups(table, "`other_cdc_meta`.`cdc_raw_file_groups`", cache) == {
        "stg_b": [(0, ["z.parquet"], None)]
    }
    assert table.reads == 3  # another warehouse's table: read, not taken from this one's cache

    cache.write_text("[damaged", encoding="utf-8")
    assert _existing_groups(table, relation, cache) == {"stg_b": [(0, ["z.parquet"], None)]} and table.reads == 4


def test_the_open_group_is_the_files_at_the_unions_types():
    types = {
        "/l/t/a.parquet": {"id": "int", "name": "string"},
        "/l/t/b.parquet": {"id": "bigint", "name": "string"},
        "/l/t/c.parquet": {"id": "bigint", "name": "null"},
    }
    groups = file_groups("/l/t", types, {"id": "bigint", "name": "string"})
    assert [(is_open, list(files)) for is_open, files in groups] == [
        (True, ["b.parquet", "c.parquet"]),
        (False, ["a.parquet"]),
    ]
    assert groups[0][1]["c.parquet"] == types["/l/t/c.parquet"]  # each file's types, for readable_as_table


@pytest.mark.parametrize(
    ("files", "names", "readable"),
    [
        ([{"id": "bigint", "name": "string"}, {"id": "bigint", "name": "null"}], ["id", "name"], True),
        ([{"id": "bigint", "tags": "array<string>"}], ["id", "tags"], True),
        ([{"id": "bigint", "after": "struct<`id`:bigint,`table`:string>"}], ["id", "after"], True),  # an envelope
        ([{"id": "bigint", "items": "array<struct<`a`:int>>"}], ["id", "items"], True),
        ([{"id": "bigint", "after": "struct<`my id`:bigint>"}], ["id", "after"], False),  # Spark prints my id:bigint
        ([{"id": "bigint", "after": "struct<`a:b`:int,`c`:int>"}], ["id", "after"], False),
        ([{"id": "bigint", "note": "null"}, {"id": "bigint"}], ["id", "note"], False),  # void in Spark
        ([{"id": "bigint", "country": "string"}], ["id", "COUNTRY", "country"], False),  # two spellings
    ],
)
def test_an_open_group_is_read_as_a_table_only_when_its_columns_can_be_declared(files, names, readable):
    """Otherwise it stays a list of files, and its files stay in the staging view's fingerprint (a view whose
    SQL lists them must be built again when one lands). A struct is declared with its field names quoted
    again from Spark's print of the type (macros/cdc/landing.sql: cdc_ddl_type), where only a plain name can be
    told from the syntax."""
    assert readable_as_table(files, names) is readable


def test_a_groups_columns_are_those_spark_merges_from_its_files():
    """Spark infers a group's columns by merging its files' footers: every column any of them names, and each
    struct's fields (one per group: a struct with another field is another type, so another group). Staging then
    need not ask (cdc_landing_reads); where Spark's merge could differ (a struct's fields, two spellings of a name),
    nothing is handed and staging asks."""
    envelope = pa.schema(
        [("before", pa.struct([("Id", pa.int64())])), ("op", pa.string()), ("source", pa.struct([("lsn", pa.int64())]))]
    )
    widened = pa.schema([("before", pa.struct([("Id", pa.int64()), ("w", pa.int32())])), ("op", pa.string())])
    flat = pa.schema([("ID", pa.int64()), ("__op", pa.string())])
    added = pa.schema([("ID", pa.int64()), ("__op", pa.string()), ("note", pa.string())])
    spelled = pa.schema([("id", pa.int64()), ("__op", pa.string())])

    def signatures(*schemas: pa.Schema) -> set:
        return {column_signature(schema) for schema in schemas}

    assert group_columns(signatures(envelope, envelope)) == {
        "raw_columns": ["before", "op", "source"],
        "raw_fields": {"before": ["Id"], "source": ["lsn"]},
    }
    assert group_columns(signatures(flat)) == {"raw_columns": ["ID", "__op"], "raw_fields": {}}
    merged = group_columns(signatures(flat, added))  # files before and after a column was added, of one type each
    assert sorted(merged["raw_columns"]) == ["ID", "__op", "note"] and merged["raw_fields"] == {}
    assert group_columns(signatures(envelope, widened)) is None  # a struct's fields differ
    assert group_columns(signatures(flat, spelled)) is None  # ID and id
    assert group_columns({column_signature(flat), None}) is None  # a file whose footer the hooks did not read
