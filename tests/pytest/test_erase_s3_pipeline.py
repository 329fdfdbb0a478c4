"""Erasure end to end with the landing zone on the real S3 server (the `s3_server` fixture) and the
run's SparkSession: the DMS and Debezium samples uploaded to s3a://<bucket>/<schema>/landing, the
customer tables built from there, then `erase` (python_hooks/personal_data/). Afterwards every object
under the bucket is read back with pyarrow: the same names, none holds an erased key, every other row
as it was (an expectation computed from the objects as uploaded); the tables lost the subject's rows
and nothing else; no Parquet file of the schema's warehouse folders holds an erased key."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyarrow import fs

from helpers.paths import PROJECT
from helpers.s3 import Server, spark_reaches
from python_hooks import personal_data as erasure
from python_hooks.project import object_store
from sample_data import debezium, dms

# test-all (nightly): the raw objects' rewriting on S3 is test_erase_s3.py's, the tables' erasure test_history.py's
pytestmark = [pytest.mark.s3, pytest.mark.nightly]

ERASED = ["5", "7", "27"]  # as test_history.py: several changes; deleted in the CRM; left the sales system
STAGES = (1, 2)
# The current-state tables that hold the customer and their subject column (models' yml meta).
TABLES = {
    "crm__customer_master": "customer_id",
    "crm__customer_address": "customer_id",
    "salesdb__customer": "id",
    "salesdb__sales_order": "customer_id",
}
BUILD = ("--select", *(f"+{t}" for t in TABLES), "--exclude", "resource_type:test")


def _key_column(path: str) -> str:
    """The subject's column in a raw object (sources' meta.cdc_subjects): `id` in the sales system's
    customer topic, customer_id everywhere else."""
    return "id" if f"/{debezium.CUSTOMER}/" in path else "customer_id"


def _holds_subject(row: dict, path: str) -> bool:
    column = _key_column(path)
    return any(name.lower() == column and str(value) in ERASED for name, value in row.items())


def _objects(s3: fs.FileSystem, bucket: str) -> dict[str, bytes]:
    """{path: bytes} of every object under the bucket."""
    found = {}
    for info in s3.get_file_info(fs.FileSelector(bucket, recursive=True)):
        if info.type == fs.FileType.File:
            with s3.open_input_stream(info.path) as stream:
                found[info.path] = stream.read()
    return found


def _rows(data: bytes) -> list[dict]:
    return pq.ParquetFile(pa.BufferReader(data)).read().to_pylist()


def _table_rows(spark, table: str) -> Counter:
    frame = spark.table(table)
    columns = [c for c in frame.columns if c != "_cdc_applied_at"]
    return Counter(tuple(map(str, row)) for row in frame.select(*[f"`{c}`" for c in columns]).collect())


@pytest.fixture(scope="module")
def erased_on_s3(s3_server: Server, dbt, spark, tmp_path_factory):
    spark_reaches(spark, s3_server)
    schema = "erase_s3"
    local = tmp_path_factory.mktemp("erase_s3_landing")
    for stage in STAGES:
        dms.write_stage(local, stage)
        debezium.write_stage(local, stage)
    s3 = object_store.filesystem_from_env()
    prefix = f"{s3_server.bucket}/{schema}/landing"
    for path in sorted(p for p in local.rglob("*") if p.is_file()):
        with s3.open_output_stream(f"{prefix}/{path.relative_to(local).as_posix()}") as out:
            out.write(path.read_bytes())
    landing = f"s3a://{prefix}"
    result = dbt("build", *BUILD, landing=landing, schema=schema)
    assert result.success, result.exception
    tables = {f"{schema}_current.{t}": column for t, column in TABLES.items()}
    before = {t: _table_rows(spark, t) for t in tables}
    columns = {t: [c for c in spark.table(t).columns if c != "_cdc_applied_at"] for t in tables}
    objects = _objects(s3, s3_server.bucket)

    from python_hooks.project.warehouse import Warehouse

    parsed = dbt("parse", landing=landing, schema=schema)
    assert parsed.success
    with Warehouse.open(["--project-dir", str(PROJECT)]) as warehouse:
        report = erasure.erase(warehouse, parsed.result, "customer", ERASED, "pytest: erasure on S3")
    return {
        "schema": schema,
        "prefix": prefix,
        "tables": tables,
        "before": before,
        "columns": columns,
        "objects": objects,
        "after": _objects(s3, s3_server.bucket),
        "report": report,
    }


def test_erasure_on_s3_leaves_no_object_with_the_subject_and_every_other_row(erased_on_s3):
    before, after = erased_on_s3["objects"], erased_on_s3["after"]
    assert sorted(after) == sorted(before)  # same names: nothing staged beside, nothing deleted
    raw = {p for p in before if p.endswith(".parquet") and before[p]}
    holding = {p for p in raw if any(_holds_subject(row, p) for row in _rows(before[p]))}
    assert len(holding) >= 3  # the check below could not pass by itself
    for path in sorted(raw):
        kept = [row for row in _rows(before[path]) if not _holds_subject(row, path)]
        assert _rows(after[path]) == kept, f"{path}: not the rows without the subject"
        if path not in holding:
            assert after[path] == before[path], f"{path} rewritten though it held no row of the subject"
    report = erased_on_s3["report"]
    assert sorted(p.rsplit("/", 1)[-1] for p in holding) == sorted(r.rsplit("/", 1)[-1] for r in report.raw_files)


def test_erasure_on_s3_removes_the_subjects_rows_from_the_tables_and_nothing_else(erased_on_s3, spark):
    held = []
    for table, column in erased_on_s3["tables"].items():
        position = erased_on_s3["columns"][table].index(column)
        rows = erased_on_s3["before"][table]
        expected = Counter({row: n for row, n in rows.items() if row[position] not in ERASED})
        if expected != rows:
            held.append(table)
        assert _table_rows(spark, table) == expected, f"{table}: rows other than the erased subject's changed"
    assert len(held) >= 2, f"only {held} held an erased customer before: the check above proves little"


def test_erasure_on_s3_leaves_no_warehouse_file_with_an_erased_key(erased_on_s3, warehouse: Path):
    files = list(warehouse.glob(f"{erased_on_s3['schema']}_*.db/**/*.parquet"))
    assert files
    for path in files:
        for row in pq.ParquetFile(path).read().to_pylist():
            for name, value in row.items():
                assert not (name.lower() in ("customer_id", "id") and str(value) in ERASED), f"{path}: {name}"
