"""`python -m python_hooks docs` (python_hooks/commands/docs.py) on a warehouse the pipeline built, in this
process (the session dbt created is the one the tests read through):

- the columns schema evolution added (sample_data/evolution.py: `status` on salesdb.customer,
  `credit_limit` and `birth_date` on crm.customer_master), which no yml lists, are warnings, not
  gaps, in their current-state tables, their staging views and downstream; the run succeeds;
- catalog.json's row count of every table is its live `count(*)`, not the metastore's numRows: after
  stage 5's merge-on-read updates, crm__customer_master has position deletes, and Iceberg's snapshot
  summary (what the Hive catalog puts in numRows) still counts the rows they removed;
- static_index.html inlines that patched catalog.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from pathlib import Path

import pytest

from helpers.paths import PROJECT
from python_hooks.commands.docs import ROWS_LABEL, build_docs
from python_hooks.commands.docs_coverage import EVOLUTION_FILE
from sample_data import debezium, dms, evolution

EVOLVED = {"credit_limit", "birth_date", "status"}


@pytest.fixture(scope="module")
def built(dbt, spark, tmp_path_factory) -> tuple[Path, str]:
    """Stages 1-4 in one run (the tables are created), then stage 5's schema changes in a second run
    (merge-on-read: position deletes for the customers it updates)."""
    landing = tmp_path_factory.mktemp("docs_live_landing")
    schema = f"t_{uuid.uuid4().hex[:10]}"
    for stage in range(1, dms.STAGES + 1):
        dms.write_stage(landing, stage)
        debezium.write_stage(landing, stage)
    assert dbt.pipeline(landing=landing, schema=schema)
    evolution.mysql_status_column(landing)
    evolution.dms_new_types(landing)
    assert dbt.pipeline(landing=landing, schema=schema)
    return landing, schema


@pytest.fixture(scope="module")
def docs(built, tmp_path_factory) -> dict:
    landing, schema = built
    target = tmp_path_factory.mktemp("docs_live_target")
    os.environ["CDC_LANDING_ROOT"] = str(landing)
    os.environ["CDC_SCHEMA"] = schema
    args = ["--project-dir", str(PROJECT), "--target-path", str(target), "--log-path", str(target / "logs")]
    lines: list[str] = []
    code = build_docs([*args, "--target", "local"], echo=lines.append)
    print("\n".join(lines))
    return {"code": code, "lines": lines, "target": target, "schema": schema}


def _catalog(docs) -> dict:
    return json.loads((docs["target"] / "catalog.json").read_text())


def test_docs_succeed_and_say_what_they_did(docs):
    assert docs["code"] == 0, "\n".join(docs["lines"])
    text = "\n".join(docs["lines"])
    assert f"docs: target local, schema {docs['schema']}, warehouse " in text
    assert re.search(r"docs: live row counts \(select count\(\*\)\) of \d+ table\(s\)", text), text
    assert "docs: 3 column(s) added by schema evolution" in text
    assert re.search(r"docs coverage: 0 gap\(s\), \d+ warning\(s\)", text), text
    assert "static_index.html" in docs["lines"][-1]


def test_columns_added_by_schema_evolution_are_warnings(docs):
    warnings = [line for line in docs["lines"] if line.startswith("WARNING ")]
    found = {
        (match["node"], match["column"])
        for match in (re.match(r"WARNING (?P<node>\S+): column (?P<column>\S+) is not in the yml", w) for w in warnings)
    }
    assert len(found) == len(warnings)
    assert {column for _, column in found} == EVOLVED
    project = "cdc_lakehouse"
    for node in (f"model.{project}.crm__customer_master", f"model.{project}.stg_crm__customer_master"):
        assert {(node, "credit_limit"), (node, "birth_date")} <= found
    for node in (f"model.{project}.salesdb__customer", f"model.{project}.stg_salesdb__customer"):
        assert (node, "status") in found
    current = next(w for w in warnings if w.startswith(f"WARNING model.{project}.crm__customer_master: column credit"))
    assert re.search(
        r"added by schema evolution on \d{4}-\d\d-\d\d, "
        rf"{docs['schema']}_current\.crm__customer_master\.credit_limit:"
        r" describe it in models/current_state/crm/_crm__models\.yml$",
        current,
    ), current
    saved = json.loads((docs["target"] / EVOLUTION_FILE).read_text())
    assert {entry["column"] for entry in saved["added_columns"]} == EVOLVED


def _metastore_rows(spark, schema: str, name: str) -> int | None:
    """numRows as dbt-spark's catalog reads it: `show table extended`'s "Statistics: … rows"."""
    information = spark.sql(f"show table extended in {schema} like '{name}'").collect()[0]["information"]
    match = re.search(r"^Statistics: .*?(\d+) rows", information, re.MULTILINE)
    return int(match[1]) if match else None


def test_row_counts_are_the_live_rows(docs, spark):
    schema = docs["schema"]
    relation = f"{schema}_current.crm__customer_master"
    live = spark.sql(f"select count(*) from {relation}").collect()[0][0]
    metastore = _metastore_rows(spark, f"{schema}_current", "crm__customer_master")
    total_records = spark.sql(
        f"select summary['total-records'] from {relation}.snapshots order by committed_at desc limit 1"
    ).collect()[0][0]
    deletes = spark.sql(f"select count(*) from {relation}.position_deletes").collect()[0][0]
    assert deletes > 0, "the sample data should leave position deletes in crm__customer_master"
    assert metastore == int(total_records) == live + deletes, (metastore, total_records, live, deletes)
    assert metastore != live

    entry = _catalog(docs)["nodes"]["model.cdc_lakehouse.crm__customer_master"]
    rows = entry["stats"]["rows"]
    assert rows["value"] == live and rows["label"] == ROWS_LABEL and rows["include"] is True
    assert f"numRows said {metastore}" in rows["description"]


def test_every_table_of_the_catalog_has_its_live_count(docs, spark):
    tables = {
        unique_id: entry
        for unique_id, entry in _catalog(docs)["nodes"].items()
        if entry["metadata"]["type"].lower() == "table"
    }
    assert len(tables) >= 5
    for unique_id, entry in tables.items():
        metadata = entry["metadata"]
        live = spark.sql(f"select count(*) from `{metadata['schema']}`.`{metadata['name']}`").collect()[0][0]
        assert entry["stats"]["rows"]["value"] == live, unique_id
        assert entry["stats"]["rows"]["label"] == ROWS_LABEL, unique_id


def test_the_static_site_inlines_the_patched_catalog(docs):
    site = (docs["target"] / "static_index.html").read_text(encoding="utf-8")
    assert "CATALOG.JSON INLINE DATA" not in site and "MANIFEST.JSON INLINE DATA" not in site
    assert json.dumps(_catalog(docs)) in site
    assert ROWS_LABEL in site
