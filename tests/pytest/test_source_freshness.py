"""`dbt source freshness` on every raw source: its loaded_at_field is the commit timestamp, so the
freshness dbt reports is the newest commit in the raw files, read here independently with pyarrow
(DMS `last_update_time`, Debezium `__source_ts_ms` or the envelope's `source.ts_ms`)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.dataset as ds

from sample_data import clock, debezium, dms, evolution

# source unique_id -> (folder under the landing root, commit-time column as a pyarrow expression)
SOURCES = {
    "source.cdc_lakehouse.crm.customer_master": ("dms/crm/customer_master", "last_update_time"),
    "source.cdc_lakehouse.crm.customer_address": ("dms/crm/customer_address", "last_update_time"),
    "source.cdc_lakehouse.salesdb.customer": ("debezium/topics/mysql.salesdb.customer", "__source_ts_ms"),
    "source.cdc_lakehouse.salesdb.sales_order": ("debezium/topics/mysql.salesdb.sales_order", "__source_ts_ms"),
    "source.cdc_lakehouse.inventory.product": ("debezium/topics/pg.inventory.product", ("source", "ts_ms")),
}


def newest_commit(folder: Path, column) -> dt.datetime:
    files = sorted(str(p) for p in folder.rglob("*.parquet"))
    values = ds.dataset(files, format="parquet").to_table(
        columns={"c": ds.field(*column) if isinstance(column, tuple) else ds.field(column)}
    )
    newest = pc.max(values["c"]).as_py()
    if isinstance(newest, int):  # Debezium: epoch milliseconds
        return dt.datetime.fromtimestamp(newest / 1000, dt.timezone.utc)
    return newest.astimezone(dt.timezone.utc) if newest.tzinfo else newest.replace(tzinfo=dt.timezone.utc)


def test_freshness_is_the_newest_commit_of_every_source(dbt, spark, tmp_path):
    landing = tmp_path / "landing"
    dms.write_stage(landing, 1)
    dms.write_stage(landing, 2)
    debezium.write_stage(landing, 1)
    debezium.write_stage(landing, 2)
    # The sample's commits are in the past, so the sources are stale and the command exits non-zero:
    # what is checked is what it reports (helpers.dbt_runner.Dbt writes --target-path <work>/<schema>).
    dbt("source", "freshness", landing=landing, schema="freshness")
    sources = json.loads((dbt._work / "freshness" / "sources.json").read_text())
    reported = {r["unique_id"]: r for r in sources["results"]}
    assert set(reported) == set(SOURCES)
    for unique_id, (folder, column) in SOURCES.items():
        result = reported[unique_id]
        assert result["status"] in {"pass", "warn", "error"}, result  # "runtime error" = the query failed
        assert result["criteria"]["error_after"] == {"count": 24, "period": "hour"}
        max_loaded_at = dt.datetime.fromisoformat(result["max_loaded_at"])
        assert max_loaded_at == newest_commit(landing / folder, column), unique_id


def test_on_the_demos_clock_every_source_is_fresh(dbt, spark, tmp_path, monkeypatch):
    """What `make demo` writes (CDC_SAMPLE_TIMES=now: every stage and its schema changes, moved to just
    before now, sample_data/clock.py) passes `dbt source freshness` with no warning or error."""
    landing = tmp_path / "landing"
    monkeypatch.setenv(clock.ENV, "now")
    for stage in range(1, dms.STAGES + 1):
        dms.write_stage(landing, stage)
        debezium.write_stage(landing, stage)
    evolution.mysql_status_column(landing)
    evolution.dms_new_types(landing)
    monkeypatch.delenv(clock.ENV)
    result = dbt("source", "freshness", landing=landing, schema="freshness_now")
    assert result.success, result.exception
    sources = json.loads((dbt._work / "freshness_now" / "sources.json").read_text())
    reported = {r["unique_id"]: r for r in sources["results"]}
    assert set(reported) == set(SOURCES)
    now = dt.datetime.now(dt.timezone.utc)
    for unique_id, (folder, column) in SOURCES.items():
        result = reported[unique_id]
        assert result["status"] == "pass", result
        max_loaded_at = dt.datetime.fromisoformat(result["max_loaded_at"])
        assert max_loaded_at == newest_commit(landing / folder, column), unique_id
        assert dt.timedelta(0) < now - max_loaded_at < dt.timedelta(minutes=30), (unique_id, max_loaded_at)
