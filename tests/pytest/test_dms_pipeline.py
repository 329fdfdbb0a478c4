"""DMS raw Parquet -> staging views -> current-state Iceberg tables, checked against the replay.

Real Spark, real Iceberg, real Parquet as DMS writes it; every table compared whole, every
column of every row, with the pure-Python replay in oracles/replay_dms.py."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from helpers.paths import PROJECT
from helpers.runs import assert_batch_log, assert_stage, assert_status, batch_log, record_stages
from helpers.tables import assert_same_table, snapshot_ids, table_rows
from oracles.replay_counts import dms_counts
from oracles.replay_dms import replay
from python_hooks.landing.pending import STAGING_TEST_FILES_VARIABLE
from sample_data import dms

KEY = ["customer_id"]
# Only the CRM models: the other sources are empty here and would only cost time.
SELECT = ("--select", "staging.crm", "current_state.crm")


def current(schema: str, table: str) -> str:
    return f"{schema}_current.crm__{table}"


def expected_state(landing: Path, table: str) -> dict[tuple, dict]:
    return replay(landing / "dms" / "crm" / table, KEY)


def actual_state(spark, schema: str, table: str) -> dict[tuple, dict]:
    columns = [*dms.TABLES[table], "_cdc_op", "_cdc_ts"]
    return table_rows(spark, current(schema, table), KEY, columns)


def assert_matches_replay(spark, schema: str, landing: Path, label: str) -> None:
    for table in dms.TABLES:
        assert_same_table(actual_state(spark, schema, table), expected_state(landing, table), f"{label} {table}")


def ledger_files(spark, schema: str, model: str) -> set[str]:
    """The raw file names the ledger lists as applied by `model`."""
    ledger = f"{schema}_cdc_meta.cdc_file_ledger"
    return {r[0] for r in spark.sql(f"select file_name from {ledger} where model_name = '{model}'").collect()}


def all_actual(spark, schema: str) -> dict:
    return {t: actual_state(spark, schema, t) for t in dms.TABLES}


def all_expected(landing: Path) -> dict:
    return {t: expected_state(landing, t) for t in dms.TABLES}


@pytest.fixture(scope="module")
def lake(dbt, spark, tmp_path_factory):
    """All DMS stages landed one by one, with a dbt run after each; per-stage results recorded."""
    landing = tmp_path_factory.mktemp("dms_landing")
    schema = "dms_lake"
    with pytest.MonkeyPatch.context() as patch:  # the sample's small tables compacted for their share of deletes
        patch.setenv("CDC_COMPACTION_MIN_DELETED_ROWS", "0")
        stages = record_stages(
            dbt,
            spark,
            landing,
            schema,
            dms.write_stage,
            dms.STAGES,
            all_actual,
            all_expected,
            select=SELECT,
            status=True,
        )
    return {"landing": landing, "schema": schema, "stages": stages, "batch_log": batch_log(spark, schema)}


@pytest.mark.parametrize("stage", range(1, dms.STAGES + 1))
def test_each_stage_equals_replay(lake, stage):
    assert_stage(lake["stages"], stage)


@pytest.mark.parametrize("table", dms.TABLES)
def test_batch_log_agrees_with_replay_counts(lake, table):
    """cdc_batch_log: one row per stage's run, its counts (rows inserted, updated, deleted; changes
    ignored by reason) equal to the replay's, batch by batch."""
    stage_files = [{p.name for p in lake["stages"][s]["written"] if p.parent.name == table} for s in lake["stages"]]
    expected = dms_counts(lake["landing"] / "dms" / "crm" / table, KEY, stage_files)
    assert_batch_log(lake["batch_log"][f"crm__{table}"], expected, table)
    assert_status(lake["stages"], f"crm__{table}", expected, table)
    assert expected[-1]["rows"] == len(expected_state(lake["landing"], table))


def test_hard_cases_by_value(lake, spark):
    """The designed cases, named, on top of the whole-table comparison."""
    state = actual_state(spark, lake["schema"], "customer_master")
    assert (7,) not in state, "a late older update must not bring back a deleted key"
    assert (999,) not in state, "a delete of an unknown key inserts nothing"
    assert state[(5,)]["email_id"].endswith("+v3@example.com"), "last of several changes in one file wins"
    assert state[(6,)]["email_id"].endswith("+v2@example.com"), "AR_H_CHANGE_SEQ breaks the timestamp tie"
    assert state[(3,)]["_cdc_op"] == "U", "a late older delete is ignored"
    assert state[(9,)]["email_id"].endswith("+v5@example.com"), "delete then re-insert in one file"
    assert state[(10,)]["email_id"].endswith("+v7@example.com"), "re-insert after a delete in an earlier run"
    assert (22,) not in state


def test_batches_are_merge_on_read_and_compaction_keeps_deletes_bounded(lake, spark):
    """Current-state tables are merge-on-read (dbt_project.yml): a batch wrote position deletes
    instead of rewriting the table, and the batch compacted a table once its deleted rows
    passed the model's cdc_compaction threshold (10%; here with no minimum count, the `lake`
    fixture), so after every run each table is back under it. The whole-table comparisons of
    every stage ran on these compacted tables."""
    schema = lake["schema"]
    for table in dms.TABLES:
        relation = current(schema, table)
        properties = {r[0]: r[1] for r in spark.sql(f"show tblproperties {relation}").collect()}
        assert properties.get("write.merge.mode") == "merge-on-read", table
        summaries = [r[1] for r in spark.sql(f"select operation, summary from {relation}.snapshots").collect()]
        assert any(int(s.get("added-position-delete-files", 0)) > 0 for s in summaries), (
            f"{table}: no batch wrote position deletes"
        )
        operations = [r[0] for r in spark.sql(f"select operation from {relation}.snapshots").collect()]
        assert "replace" in operations, f"{table}: never compacted (rewrite_data_files commits 'replace')"
        data_rows, deleted_rows = spark.sql(
            "select coalesce(sum(case when content = 0 then record_count end), 0),"
            f" coalesce(sum(case when content = 1 then record_count end), 0) from {relation}.files"
        ).collect()[0]
        assert deleted_rows < 0.10 * data_rows, f"{table}: {deleted_rows} deleted of {data_rows} rows left uncompacted"


def test_pipeline_state_files_are_bin_packed(lake, dbt, spark):
    """A batch adds a small file to the model's partition of cdc_tombstones, cdc_file_ledger and
    cdc_batch_log; cdc_compact_meta bin-packs them once there are `meta_files` (here 2), rows unchanged."""
    schema, model = lake["schema"], "crm__customer_master"

    def state():
        result = {}
        for table in ("cdc_tombstones", "cdc_file_ledger", "cdc_batch_log"):
            relation = f"{schema}_cdc_meta.{table}"
            files = spark.sql(f"select count(*) from {relation}.files where partition.model_name = '{model}'")
            rows = spark.sql(f"select * from {relation} where model_name = '{model}'").collect()
            result[table] = (files.collect()[0][0], sorted(map(tuple, rows), key=repr))
        return result

    before = state()
    assert all(files >= 2 for files, _ in before.values()), before
    args = json.dumps({"model_name": model, "settings": {"enabled": True, "meta_files": 2}})
    assert dbt("run-operation", "cdc_compact_meta", "--args", args, landing=lake["landing"], schema=schema).success
    after = state()
    for table in before:
        assert after[table][0] == 1, f"{table}: {after[table][0]} files after bin-packing"
        assert after[table][1] == before[table][1], f"{table}: rows changed"


def test_data_tests_pass(lake, dbt):
    result = dbt("test", *SELECT, landing=lake["landing"], schema=lake["schema"])
    assert result.success


def test_rerun_without_new_files_commits_nothing(lake, dbt, spark):
    schema = lake["schema"]
    before = {t: snapshot_ids(spark, current(schema, t)) for t in dms.TABLES}
    ledger_before = spark.table(f"{schema}_cdc_meta.cdc_file_ledger").count()
    assert dbt("run", *SELECT, landing=lake["landing"], schema=schema).success
    assert {t: snapshot_ids(spark, current(schema, t)) for t in dms.TABLES} == before
    assert spark.table(f"{schema}_cdc_meta.cdc_file_ledger").count() == ledger_before
    assert_matches_replay(spark, schema, lake["landing"], "rerun")


def test_redelivered_file_changes_nothing(lake, dbt, spark):
    """The same CDC file delivered again under a new name (and an old name re-written)."""
    schema, landing = lake["schema"], lake["landing"]
    folder = landing / "dms" / "crm" / "customer_master"
    before = actual_state(spark, schema, "customer_master")
    shutil.copy(folder / "20261102-091500000.parquet", folder / "20261105-000000000.parquet")
    shutil.copy(folder / "20261102-093000000.parquet", folder / "20261102-093000000.parquet.tmp")
    (folder / "20261102-093000000.parquet.tmp").replace(folder / "20261102-093000000.parquet")
    assert dbt("run", *SELECT, landing=landing, schema=schema).success
    assert actual_state(spark, schema, "customer_master") == before
    assert_matches_replay(spark, schema, landing, "re-delivery")


def test_full_refresh_rebuilds_the_same_state(lake, dbt, spark):
    schema, landing = lake["schema"], lake["landing"]
    assert dbt("run", "--full-refresh", *SELECT, landing=landing, schema=schema).success
    assert_matches_replay(spark, schema, landing, "full refresh")
    files = ledger_files(spark, schema, "crm__customer_master")
    assert files == {p.name for p in (landing / "dms" / "crm" / "customer_master").glob("*.parquet")}
    # the next run after a rebuild reads nothing again
    before = snapshot_ids(spark, current(schema, "customer_master"))
    assert dbt("run", *SELECT, landing=landing, schema=schema).success
    assert snapshot_ids(spark, current(schema, "customer_master")) == before


def test_date_partitioned_folders_equal_replay_stage_by_stage(dbt, spark, schema, tmp_path):
    """DMS with DatePartitionEnabled: CDC files under <table>/<yyyy>/<mm>/<dd>/, the full load at the
    table's root; a batch reads only its new files, wherever they are."""
    landing = tmp_path / "landing"
    for stage in range(1, dms.STAGES + 1):
        for path in dms.write_stage(landing, stage):
            if not path.name.startswith("LOAD"):
                day = path.parent / path.name[:4] / path.name[4:6] / path.name[6:8]
                day.mkdir(parents=True, exist_ok=True)
                path.replace(day / path.name)
        assert dbt("run", *SELECT, landing=landing, schema=schema).success, f"stage {stage}"
        assert_matches_replay(spark, schema, landing, f"dated stage {stage}")
    files = ledger_files(spark, schema, "crm__customer_master")
    assert files == {p.name for p in (landing / "dms" / "crm" / "customer_master").rglob("*.parquet")}
    assert any(p.parent.name != "customer_master" for p in (landing / "dms" / "crm").rglob("*.parquet"))


def test_idle_scheduled_run_builds_nothing_and_commits_nothing(dbt, spark, schema, tmp_path, caplog, monkeypatch):
    """`make run` with no new file: the current-state models are left out of dbt build (the hooks
    compare the folders' listings with the ledger), so no table gets a snapshot; one new file in one
    folder brings back exactly that table."""
    landing = tmp_path / "landing"
    for stage in (1, 2):
        dms.write_stage(landing, stage)
    assert dbt.pipeline(*SELECT, landing=landing, schema=schema)
    before = {t: snapshot_ids(spark, current(schema, t)) for t in dms.TABLES}
    meta = f"{schema}_cdc_meta"
    ledger_before = spark.table(f"{meta}.cdc_file_ledger").count()
    caplog.set_level("INFO", logger="python_hooks.commands.run")
    assert dbt.pipeline(*SELECT, landing=landing, schema=schema)
    assert "nothing new for crm__customer_address, crm__customer_master: not built this run" in caplog.text
    assert {t: snapshot_ids(spark, current(schema, t)) for t in dms.TABLES} == before
    assert spark.table(f"{meta}.cdc_file_ledger").count() == ledger_before
    new_files = set()
    for path in dms.write_stage(tmp_path / "next", 3):
        if path.parent.name == "customer_master":
            shutil.copy(path, landing / "dms" / "crm" / "customer_master" / path.name)
            new_files.add(path.name)
    caplog.clear()
    handed = []  # what the run hands its build's staging tests (read in a callback, while the build runs)

    def note_handed(_event) -> None:
        if not handed and STAGING_TEST_FILES_VARIABLE in os.environ:
            handed.append(json.loads(os.environ[STAGING_TEST_FILES_VARIABLE]))

    dbt._runner.callbacks.append(note_handed)
    try:
        assert dbt.pipeline(*SELECT, landing=landing, schema=schema)
    finally:
        dbt._runner.callbacks.remove(note_handed)
    assert "nothing new for crm__customer_address: not built this run" in caplog.text
    assert snapshot_ids(spark, current(schema, "customer_address")) == before["customer_address"]
    assert snapshot_ids(spark, current(schema, "customer_master")) != before["customer_master"]
    assert_matches_replay(spark, schema, landing, "after the idle run")
    # A staging view's data test in `make run` reads the files the run applies, not the folder's history
    # (macros/cdc/staging_tests.sql): the run hands their names over. The sample's staging tests all check what
    # the batch guarantees, so the run left them out (commands/selection.py); a test that stays (an analyst's own)
    # reads what is handed, as this one does given the same; a plain `dbt test` reads the whole view.
    assert new_files and handed and set(re.findall(r"'([^']+)'", handed[0]["stg_crm__customer_master"])) == new_files
    monkeypatch.setenv(STAGING_TEST_FILES_VARIABLE, json.dumps(handed[0]))
    assert dbt("test", "--select", "stg_crm__customer_master", landing=landing, schema=schema).success
    assert _tested_files(dbt, schema) == new_files
    monkeypatch.delenv(STAGING_TEST_FILES_VARIABLE)
    assert dbt("test", "--select", "stg_crm__customer_master", landing=landing, schema=schema).success
    assert _tested_files(dbt, schema) is None


def test_an_unchanged_seed_is_loaded_and_tested_once_and_a_dropped_one_again(dbt, spark, schema, tmp_path):
    """`make run` loads a seed and runs its own tests; the next run leaves its table as it is (no snapshot) and
    runs none of them, until its CSV, config or the project's macros change (unit/test_unchanged_seeds.py); a
    seed table dropped meanwhile is loaded again. Rows compared with the CSV itself."""
    import csv

    landing = tmp_path / "landing"
    landing.mkdir()
    seed = f"{schema}_seeds.order_statuses"
    with (PROJECT / "seeds" / "order_statuses.csv").open(encoding="utf-8") as handle:
        expected = {row["order_status"]: row["order_status_name"] for row in csv.DictReader(handle)}

    def run() -> tuple[set[str], set[str]]:
        # cautious: not the `relationships` test from fct_sales_order, which this schema does not build
        assert dbt.pipeline(
            "--select", "order_statuses", "--indirect-selection", "cautious", landing=landing, schema=schema
        )
        assert {r.order_status: r.order_status_name for r in spark.table(seed).collect()} == expected
        results = json.loads((dbt.target_path(schema) / "run_results.json").read_text(encoding="utf-8"))
        ran = {r["unique_id"] for r in results["results"]}
        return {u for u in ran if u.startswith("seed.")}, {u for u in ran if u.startswith("test.")}

    seeds, tests = run()
    assert seeds == {"seed.cdc_lakehouse.order_statuses"} and tests, (seeds, tests)
    loaded = snapshot_ids(spark, seed)
    seeds, tests = run()
    assert seeds == {"seed.cdc_lakehouse.order_statuses"} and not tests, tests
    assert snapshot_ids(spark, seed) == loaded, "an unchanged seed was written again"
    spark.sql(f"drop table {seed}")
    seeds, tests = run()
    assert snapshot_ids(spark, seed), "the dropped seed was not loaded again"


def _tested_files(dbt, schema: str) -> set[str] | None:
    """The raw file names the last compiled staging tests of customer_master read (every test the
    same), or None when they read the whole view."""
    found = set()
    for path in dbt.target_path(schema).glob("compiled/**/staging/crm/_crm__models.yml/*.sql"):
        text = path.read_text(encoding="utf-8")
        if not re.search(r"\.stg_crm__customer_master\b", text):
            continue
        match = re.search(r"_cdc_source_file in \(([^)]*)\)", text)
        found.add(frozenset(re.findall(r"'([^']+)'", match.group(1))) if match else None)
    assert len(found) == 1, f"the staging tests read different files: {found}"
    files = found.pop()
    return None if files is None else set(files)


def test_empty_landing_builds_empty_tables(dbt, spark, schema, tmp_path):
    """Every model, snapshot and test (no selection): sources without files give empty tables."""
    assert dbt("build", landing=tmp_path, schema=schema).success
    for table in dms.TABLES:
        assert spark.table(current(schema, table)).count() == 0
        names = [f.name for f in spark.table(current(schema, table)).schema.fields]
        assert names[: len(dms.TABLES[table])] == list(dms.TABLES[table])


def test_one_table_folder_alone_run_after_run(dbt, spark, schema, tmp_path):
    """A landing root holding only customer_master files, arriving file by file."""
    full = tmp_path / "full"
    only = tmp_path / "only"
    target = only / "dms" / "crm" / "customer_master"
    target.mkdir(parents=True)
    for stage in range(1, dms.STAGES + 1):
        for path in dms.write_stage(full, stage):
            if path.parent.name == "customer_master":
                shutil.copy(path, target / path.name)
                assert dbt("run", *SELECT, landing=only, schema=schema).success
                assert_same_table(
                    actual_state(spark, schema, "customer_master"), replay(target, KEY), f"after {path.name}"
                )
    assert spark.table(current(schema, "customer_address")).count() == 0


def test_bad_file_is_refused_and_nothing_is_damaged(dbt, spark, schema, tmp_path):
    for stage in (1, 2):
        dms.write_stage(tmp_path, stage)
    assert dbt("run", *SELECT, landing=tmp_path, schema=schema).success
    address_before = actual_state(spark, schema, "customer_address")
    snapshots_before = snapshot_ids(spark, current(schema, "customer_address"))

    dms.write_stage(tmp_path, 3)
    bad = tmp_path / "dms" / "crm" / "customer_address" / "20261103-120000000.parquet"
    good = pq.read_table(tmp_path / "dms" / "crm" / "customer_address" / "20261103-101000000.parquet")
    key_index = good.schema.get_field_index("customer_id")
    pq.write_table(good.set_column(key_index, "customer_id", pa.nulls(good.num_rows, pa.int64())), bad)

    result = dbt("run", *SELECT, landing=tmp_path, schema=schema)
    assert not result.success
    messages = " ".join(str(r.message) for r in result.result.results if r.message)
    assert bad.name in messages and "customer_id" in messages and "crm__customer_address" in messages
    # the other table took stage 3; the refused one is exactly as before, with no new commit
    assert_same_table(
        actual_state(spark, schema, "customer_master"),
        expected_state(tmp_path, "customer_master"),
        "customer_master next to a bad file",
    )
    assert actual_state(spark, schema, "customer_address") == address_before
    assert snapshot_ids(spark, current(schema, "customer_address")) == snapshots_before

    bad.unlink()
    assert dbt("run", *SELECT, landing=tmp_path, schema=schema).success
    assert_matches_replay(spark, schema, tmp_path, "after removing the bad file")


def test_status_plot_draws_every_table(lake, dbt, spark, tmp_path):
    """`status --plot`: a PNG with a line per table, drawn from the batch log (not blank)."""
    import matplotlib.image

    from python_hooks.commands import status

    rows = [row for rows in lake["batch_log"].values() for row in rows]
    path = status.plot(rows, tmp_path / "lag.png")
    image = matplotlib.image.imread(path)
    assert image.shape[0] > 300 and image.shape[1] > 500, image.shape
    # Not one colour: axes, labels and the tables' lines are drawn (white background, coloured lines).
    colours = {tuple(pixel) for pixel in image.reshape(-1, image.shape[-1])[::7].round(2)}
    assert len(colours) > 20, f"{len(colours)} colours: the plot looks empty"


def test_a_model_selected_without_its_staging_model_says_what_to_select(dbt, spark, schema, tmp_path, caplog):
    """On a new warehouse, `run --select crm__customer_master` alone: one sentence naming the staging model and
    the selection to use (not Spark's "To tolerate the error on drop ..."), no table; then with it, the table."""
    landing = tmp_path / "landing"
    dms.write_stage(landing, 1)
    caplog.clear()
    assert not dbt.pipeline("--select", "crm__customer_master", landing=landing, schema=schema)
    said = "\n".join(r.getMessage() for r in caplog.records if r.levelname == "ERROR")
    assert "stg_crm__customer_master, which is not in the warehouse yet" in said, said
    assert "--select +crm__customer_master" in said, said
    assert not spark.catalog.tableExists(current(schema, "customer_master"))
    assert dbt.pipeline("--select", "+crm__customer_master", landing=landing, schema=schema)
    expected = expected_state(landing, "customer_master")
    assert_same_table(actual_state(spark, schema, "customer_master"), expected, "with its staging model")
