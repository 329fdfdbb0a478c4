"""Raw landing files rewritten without a subject's rows (python_hooks/personal_data/), without Spark."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from python_hooks import personal_data as erase
from python_hooks.personal_data import raw_files

TS = pa.timestamp("us", tz="UTC")


def _dms(path, rows):
    schema = pa.schema(
        [("Op", pa.string()), ("last_update_time", TS), ("CUSTOMER_ID", pa.int64()), ("email", pa.string())]
    )
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path, compression="snappy")


def test_dms_file_loses_only_the_subjects_rows_and_keeps_name_schema_and_order(tmp_path):
    at = dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc)
    rows = [
        {"Op": "I", "last_update_time": at, "CUSTOMER_ID": 1, "email": "a@x"},
        {"Op": "U", "last_update_time": at, "CUSTOMER_ID": 42, "email": "secret@x"},
        {"Op": "U", "last_update_time": at, "CUSTOMER_ID": 2, "email": "b@x"},
        {"Op": "D", "last_update_time": at, "CUSTOMER_ID": 42, "email": None},
        {"Op": "I", "last_update_time": at, "CUSTOMER_ID": None, "email": "c@x"},
    ]
    path = tmp_path / "20261101-080000000.parquet"
    _dms(path, rows)
    schema = pq.read_schema(path)
    assert erase.scrub_raw_file(path, "customer_id", ["42"], "dms") == 2
    kept = pq.read_table(path)
    assert kept.schema == schema
    assert kept.to_pylist() == [rows[0], rows[2], rows[4]]
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]  # no staged copy left behind
    assert pq.ParquetFile(path).metadata.row_group(0).column(0).compression == "SNAPPY"


def test_file_without_the_subject_is_not_rewritten(tmp_path):
    path = tmp_path / "LOAD00000001.parquet"
    _dms(path, [{"Op": None, "last_update_time": None, "CUSTOMER_ID": 1, "email": "a@x"}])
    before = path.stat().st_mtime_ns
    assert erase.scrub_raw_file(path, "customer_id", ["42", "7"], "dms") == 0
    assert path.stat().st_mtime_ns == before


def test_debezium_envelope_matches_the_key_in_before_or_after(tmp_path):
    image = pa.struct([("id", pa.int32()), ("name", pa.string())])
    schema = pa.schema([("before", image), ("after", image), ("op", pa.string())])
    rows = [
        {"before": None, "after": {"id": 42, "name": "Secret"}, "op": "c"},
        {"before": {"id": 42, "name": "Secret"}, "after": None, "op": "d"},
        {"before": {"id": 3, "name": "Kept"}, "after": {"id": 3, "name": "Kept 2"}, "op": "u"},
        {"before": None, "after": None, "op": "t"},
    ]
    path = tmp_path / "pg.inventory.customer+0+0000000000.snappy.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    assert erase.scrub_raw_file(path, "id", ["42"], "debezium_envelope") == 2
    assert pq.read_table(path).to_pylist() == rows[2:]


def test_keyed_hash_needs_the_secret_and_differs_by_subject():
    secret = "s" * 16
    assert erase.subject_hash(secret, "customer", "42") != erase.subject_hash("t" * 16, "customer", "42")
    assert erase.subject_hash(secret, "customer", "42") != erase.subject_hash(secret, "employee", "42")
    assert len(erase.subject_hash(secret, "customer", "42")) == 64


@pytest.mark.parametrize("secret", ["", "short", "has'quote-1234567890", "has}brace-1234567890"])
def test_unusable_secrets_are_refused(monkeypatch, secret):
    monkeypatch.setenv(erase.SECRET_ENV, secret)
    with pytest.raises(erase.ErasureError, match="CDC_ERASURE_SECRET"):
        erase.secret_from_env()


# ---------------------------------------------------------------- rectification


def test_dms_file_gets_the_correction_in_the_subjects_non_null_values_only(tmp_path):
    at = dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc)
    rows = [
        {"Op": "I", "last_update_time": at, "CUSTOMER_ID": 42, "email": "old@x"},
        {"Op": "U", "last_update_time": at, "CUSTOMER_ID": 2, "email": "old@x"},  # another customer's same value
        {"Op": "U", "last_update_time": at, "CUSTOMER_ID": 42, "email": "older@x"},
        {"Op": "D", "last_update_time": at, "CUSTOMER_ID": 42, "email": None},
    ]
    path = tmp_path / "20261101-080000000.parquet"
    _dms(path, rows)
    values, types = raw_files.raw_personal_values(path, "customer_id", ["42"], "dms", ["email"])
    assert values == {("email", "42"): {"old@x", "older@x"}} and types == {"email": pa.string()}
    assert erase.rectify_raw_file(path, "customer_id", ["42"], "dms", {"email": "new@x"}) == 2
    expected = [
        {**rows[0], "email": "new@x"},
        rows[1],
        {**rows[2], "email": "new@x"},
        rows[3],
    ]
    assert pq.read_table(path).to_pylist() == expected
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]
    # again: nothing left to change, the file is not rewritten
    before = path.stat().st_mtime_ns
    assert erase.rectify_raw_file(path, "customer_id", ["42"], "dms", {"email": "new@x"}) == 0
    assert path.stat().st_mtime_ns == before


def test_debezium_envelope_gets_the_correction_in_before_and_after(tmp_path):
    image = pa.struct([("id", pa.int32()), ("name", pa.string()), ("born", pa.date32())])
    schema = pa.schema([("before", image), ("after", image), ("op", pa.string())])
    day = dt.date(1980, 1, 2)
    rows = [
        {"before": None, "after": {"id": 42, "name": "Old", "born": day}, "op": "c"},
        {
            "before": {"id": 42, "name": "Old", "born": day},
            "after": {"id": 42, "name": "Older", "born": None},
            "op": "u",
        },
        {"before": {"id": 3, "name": "Old", "born": day}, "after": None, "op": "d"},
    ]
    path = tmp_path / "pg.inventory.customer+0+0000000000.snappy.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    values, _ = raw_files.raw_personal_values(path, "id", ["42"], "debezium_envelope", ["name", "born"])
    assert values == {("name", "42"): {"Old", "Older"}, ("born", "42"): {"1980-01-02"}}
    changes = {"name": "New", "born": "1981-03-04"}
    assert erase.rectify_raw_file(path, "id", ["42"], "debezium_envelope", changes) == 5
    new_day = dt.date(1981, 3, 4)
    assert pq.read_table(path).to_pylist() == [
        {"before": None, "after": {"id": 42, "name": "New", "born": new_day}, "op": "c"},
        {
            "before": {"id": 42, "name": "New", "born": new_day},
            "after": {"id": 42, "name": "New", "born": None},
            "op": "u",
        },
        rows[2],
    ]


def test_a_correction_that_is_not_a_value_of_the_column_type_is_refused():
    with pytest.raises(erase.ErasureError, match="not a value of type"):
        raw_files.arrow_value("not a date", pa.date32())


@pytest.mark.parametrize(
    ("assignments", "message"),
    [((), "nothing to rectify"), (("email",), "expected column=value"), (("a=1", "A=2"), "twice")],
)
def test_set_options_are_checked(assignments, message):
    with pytest.raises(erase.ErasureError, match=message):
        erase.parse_changes(assignments)


def test_set_options_keep_the_value_as_given():
    assert erase.parse_changes(["Phone_Number=000", "note=a=b", "empty="]) == {
        "phone_number": "000",
        "note": "a=b",
        "empty": "",
    }


def test_tables_built_from_a_holder_that_declare_no_subject_are_named():
    from types import SimpleNamespace as N

    def node(name, materialized, *parents):
        return N(
            unique_id=f"model.p.{name}",
            name=name,
            resource_type="model",
            config=N(materialized=materialized),
            depends_on=N(nodes=list(parents)),
        )

    source = N(meta={"cdc_subjects": {"customer": "id"}})
    nodes = [
        node("stg_customer", "view", "source.p.crm.customer"),
        node("customer_current", "incremental", "model.p.stg_customer"),  # a holder (declared or inherited)
        node("customer_report", "table", "model.p.stg_customer"),  # through a view: undeclared
        node("customer_counts", "view", "model.p.customer_current"),
        node("customer_rollup", "table", "model.p.customer_counts"),  # through a view of a holder: undeclared
        node("products", "table", "source.p.shop.product"),  # no subject upstream
    ]
    manifest = N(
        sources={"source.p.crm.customer": source, "source.p.shop.product": N(meta={})},
        nodes={n.unique_id: n for n in nodes},
    )
    holders = [erase.Holder("customer_current", "id")]
    assert erase.undeclared_downstream(manifest, "customer", holders) == ["customer_report", "customer_rollup"]
    assert erase.undeclared_downstream(manifest, "employee", []) == []


def test_raw_folders_python_cannot_reach_are_refused_and_empty_files_left_out_with_a_warning(tmp_path, caplog):
    from python_hooks.project.storage import Location

    elsewhere = erase.Holder("crm.customer", "id", folder=Location.parse("gs://lake/crm/customer"), producer="dms")
    with pytest.raises(erase.ErasureError, match="gs://lake/crm/customer are neither on this machine's disk nor on S3"):
        raw_files.raw_folder_files(elsewhere)
    _dms(tmp_path / "LOAD00000001.parquet", [{"Op": None, "last_update_time": None, "CUSTOMER_ID": 1, "email": "a"}])
    (tmp_path / "2026").mkdir()
    (tmp_path / "2026" / "20261101-080000000.parquet").write_bytes(b"")  # an upload in progress
    here = erase.Holder("crm.customer", "customer_id", folder=Location.parse(tmp_path), producer="dms")
    assert [f.relative for f in raw_files.raw_folder_files(here)] == ["LOAD00000001.parquet"]
    assert "2026/20261101-080000000.parquet is empty" in caplog.text
    caplog.clear()
    raw_files.raw_folder_files(here, warn=False)
    assert caplog.text == ""
