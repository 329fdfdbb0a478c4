"""The cluster target: the same models on a Spark standalone cluster behind the Spark Thrift Server,
with the Hive metastore in PostgreSQL and Iceberg's commit lock on (python_hooks/cluster/).

The cluster is this run's own (conftest `cluster`: free ports, its own folder, stopped at the end).
Tables are read through the Thrift Server with PyHive, and compared whole with the same pure-Python
replays as on the embedded target. What runs here, on the cluster:
  - the demo's DMS and Debezium stages through the pipeline (hooks + dbt build, snapshot and marts
    included), every current-state table equal to its replay after every stage;
  - schema evolution (the demo's stage 5) and a rerun with nothing new (snapshot rerun, no commit);
  - a staging view built again only when its raw schema changes (its fingerprint among its properties);
  - (a) a second process's `dbt show` while a run waits in the middle of a batch;
  - (b) two writers on one table: raw concurrent commits (Iceberg's lock: none lost), and two runs
    of the same model at once (the second to publish refuses, nothing lost or doubled);
  - (c) a run killed with SIGKILL mid-batch: no lock left, the next run completes;
  - erase, rectify and maintain through their commands, then a run: erased and rectified stay so.
Also the embedded target's one-line refusal of a second process (no cluster needed).
The embedded-only suites (hostile names, promotions, history, unit tests, docs) are not repeated here.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from helpers.cluster import OTHER, Output, locks_settle, release, run_process
from helpers.paths import PROJECT
from helpers.tables import assert_same_table
from oracles.replay_debezium import replay_topic
from oracles.replay_dms import replay
from sample_data import debezium, dms, evolution
from test_debezium_pipeline import MODELS as DEBEZIUM_MODELS

CRM = ("--select", "staging.crm", "current_state.crm")
DBT = str(Path(sys.executable).with_name("dbt"))


def dms_expected(landing: Path) -> dict:
    return {table: replay(landing / "dms" / "crm" / table, ["customer_id"]) for table in dms.TABLES}


def dms_actual(cluster, schema: str, columns_of=None) -> dict:
    return {
        table: cluster.table_rows(
            f"{schema}_current.crm__{table}",
            ["customer_id"],
            (columns_of or {}).get(table) or [*dms.TABLES[table], "_cdc_op", "_cdc_ts"],
        )
        for table in dms.TABLES
    }


def debezium_expected(landing: Path) -> dict:
    return {
        topic: replay_topic(debezium.topic_dir(landing, topic), spec["shape"], spec["key"])
        for topic, spec in debezium.TOPICS.items()
    }


def debezium_actual(cluster, schema: str) -> dict:
    return {
        topic: cluster.table_rows(
            f"{schema}_current.{model}", debezium.TOPICS[topic]["key"], [*columns, "_cdc_op", "_cdc_ts"]
        )
        for topic, (model, columns) in DEBEZIUM_MODELS.items()
    }


def snapshot_ids(cluster, relation: str) -> list[int]:
    return [r[0] for r in cluster.query(f"select snapshot_id from {relation}.snapshots order by committed_at")]


@pytest.fixture(scope="module")
def lake(cluster, dbt, tmp_path_factory):
    """The demo's five stages on the cluster, the whole pipeline after each; then a rerun."""
    landing = tmp_path_factory.mktemp("cluster_landing")
    schema = "cluster_lake"
    stages = {}
    for stage in range(1, dms.STAGES + 2):
        if stage <= dms.STAGES:
            dms.write_stage(landing, stage)
            debezium.write_stage(landing, stage)
        else:
            evolution.mysql_status_column(landing)
            evolution.dms_new_types(landing)
        started = time.monotonic()
        # The data tests run at the last CDC stage and at the rerun (time: CI runs this on 2 cores).
        skip_tests = () if stage == dms.STAGES else ("--exclude-resource-type", "test")
        ok = dbt.pipeline(*skip_tests, landing=landing, schema=schema, target="cluster")
        stages[stage] = {"success": ok, "seconds": time.monotonic() - started}
        if ok:
            # a staging view the runs left as it was keeps a property its build would not write
            view = f"{schema}_staging.stg_crm__customer_master"
            stages[stage]["view_kept"] = any(
                row[0] == "test.kept" for row in cluster.query(f"show tblproperties {view}")
            )
            cluster.execute(f"alter view {view} set tblproperties ('test.kept' = 'yes')")
            stages[stage]["dms"] = (dms_actual(cluster, schema), dms_expected(landing))
            stages[stage]["debezium"] = (debezium_actual(cluster, schema), debezium_expected(landing))
    relations = [f"{schema}_current.{model}" for model, _ in DEBEZIUM_MODELS.values()]
    relations += [f"{schema}_current.crm__{table}" for table in dms.TABLES]
    before = {r: snapshot_ids(cluster, r) for r in [*relations, f"{schema}_snapshots.customer_snapshot"]}
    rerun = dbt.pipeline(landing=landing, schema=schema, target="cluster")
    after = {r: snapshot_ids(cluster, r) for r in before}
    return {"landing": landing, "schema": schema, "stages": stages, "rerun": rerun, "before": before, "after": after}


@pytest.mark.parametrize("stage", range(1, dms.STAGES + 1))
def test_each_stage_equals_replay_on_the_cluster(lake, stage):
    recorded = lake["stages"][stage]
    assert recorded["success"], f"the pipeline failed at stage {stage} on the cluster"
    for producer in ("dms", "debezium"):
        actual, expected = recorded[producer]
        for table, rows in expected.items():
            assert_same_table(actual[table], rows, f"cluster stage {stage} {table}")


def test_schema_evolution_on_the_cluster(lake, cluster):
    stage = dms.STAGES + 1
    assert lake["stages"][stage]["success"], "the pipeline failed on the schema changes"
    schema = lake["schema"]
    columns = {row[0]: row[1] for row in cluster.query(f"describe table {schema}_current.crm__customer_master")}
    assert (columns.get("credit_limit"), columns.get("birth_date")) == ("decimal(18,4)", "date")
    master = [*dms.TABLES["customer_master"], "credit_limit", "birth_date", "_cdc_op", "_cdc_ts"]
    actual = cluster.table_rows(f"{schema}_current.crm__customer_master", ["customer_id"], master)
    expected = replay(lake["landing"] / "dms" / "crm" / "customer_master", ["customer_id"])
    expected = {k: {c: row.get(c) for c in master} for k, row in expected.items()}
    assert_same_table(actual, expected, "cluster: new decimal and date columns")

    customers = cluster.table_rows(f"{schema}_current.salesdb__customer", ["id"], ["id", "status"])
    assert len(customers) == 30 and {row["status"] for row in customers.values()} == {"Green"}
    logged = cluster.query(f"select table_name, column_name, action from {schema}_cdc_meta.schema_evolution_log")
    assert (f"`{schema}_current`.`salesdb__customer`", "status", "add_column") in logged
    assert (f"`{schema}_current`.`crm__customer_master`", "credit_limit", "add_column") in logged


def test_a_staging_view_is_built_again_only_when_its_raw_schema_changes_on_the_cluster(lake):
    """The view's fingerprint lives among its own properties (evolution/staging_views.py), so the cluster
    leaves a view as it is while new raw files bring no schema change, and builds it when they do (stage 2's
    CDC files add Op and the sequence column; the last run brings new column types)."""
    kept = {stage: recorded.get("view_kept") for stage, recorded in lake["stages"].items()}
    assert kept == {1: False, 2: False, **{stage: True for stage in range(3, dms.STAGES + 1)}, dms.STAGES + 1: False}


def test_rerun_with_nothing_new_commits_nothing_and_snapshots_rerun(lake, cluster):
    assert lake["rerun"], "the rerun failed on the cluster (the snapshot ran for the 6th time)"
    assert lake["after"] == lake["before"], "a run with no new file committed to a table"
    versions = cluster.query(
        f"select count(*), count(distinct customer_id) from {lake['schema']}_snapshots.customer_snapshot"
    )[0]
    assert versions[0] > versions[1] > 0, "the snapshot kept several versions of some customers"


def _command(lake, cluster, *args: str) -> subprocess.CompletedProcess:
    """`python -m python_hooks <args> --target cluster` in its own process, as an engineer runs it."""
    environ = {**cluster.environ, "CDC_LANDING_ROOT": str(lake["landing"]), "CDC_SCHEMA": lake["schema"]}
    return subprocess.run(
        [sys.executable, "-m", "python_hooks", *args, "--target", "cluster"],
        env=environ,
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_erase_rectify_and_maintain_on_the_cluster(lake, cluster):
    """The personal-data commands and maintenance on the shared target (the Thrift Server has the
    secret: `cluster up` ran with this environment), then a pipeline run: the erased customer stays
    gone, the rectified value stays, everything else equals the replay of the rewritten raw files."""
    schema, landing = lake["schema"], lake["landing"]
    erased = _command(lake, cluster, "erase", "--subject", "customer", "--key", "7", "--reason", "cluster test")
    assert erased.returncode == 0, erased.stdout[-2000:] + erased.stderr[-4000:]
    assert "erased 1 customer key(s) on target cluster" in erased.stdout
    new_email = "rectified.3@example.com"
    rectified = _command(
        lake, cluster, "rectify", "--subject", "customer", "--key", "3", "--set", f"email_id={new_email}",
        "--reason", "cluster test",
    )  # fmt: skip
    assert rectified.returncode == 0, rectified.stdout[-2000:] + rectified.stderr[-4000:]
    maintained = _command(lake, cluster, "maintain")
    assert maintained.returncode == 0, maintained.stdout[-2000:] + maintained.stderr[-4000:]
    assert dbt_pipeline_ok(lake, cluster)
    for table, column in [
        ("current.crm__customer_master", "customer_id"),
        ("current.salesdb__customer", "id"),
        ("current.salesdb__sales_order", "customer_id"),
        ("snapshots.customer_snapshot", "customer_id"),
    ]:
        assert cluster.query(f"select count(*) from {schema}_{table} where {column} = 7")[0][0] == 0, table
    emails = cluster.query(f"select distinct email_id from {schema}_snapshots.customer_snapshot where customer_id = 3")
    assert emails == [(new_email,)]
    expected = dms_expected(landing)
    assert expected["customer_master"][(3,)]["email_id"] == new_email and (7,) not in expected["customer_master"]
    actual = dms_actual(cluster, schema)
    for table, rows in expected.items():
        columns = [*dms.TABLES[table], "_cdc_op", "_cdc_ts"]
        rows = {k: {c: row.get(c) for c in columns} for k, row in rows.items()}
        assert_same_table(actual[table], rows, f"cluster after erase/rectify {table}")


@pytest.mark.nightly  # the cluster's own S3 and the landing on S3 are each in make test (docs/tests.md)
def test_landing_on_s3_equals_replay_on_the_cluster(cluster, cluster_s3, tmp_path, monkeypatch):
    """The shared target with everything on S3: the cluster's warehouse is (the `cluster` fixture), and
    here the raw files are too. The sample's stages are put on S3 as producers upload them; `make run`
    on the cluster (its own process) after stage 1 and after stages 2 to 4; every current-state table
    then equals the replay of the files."""
    from helpers.fault_run import put_new_files

    for name, value in cluster_s3.variables.items():  # the uploads of this process reach the same server
        monkeypatch.setenv(name, value)
    landing, remote, schema = tmp_path / "landing", f"s3a://{cluster_s3.bucket}/landing", "cluster_s3"
    sent: set[Path] = set()
    for stages in ((1,), (2, 3, 4)):
        for stage in stages:
            dms.write_stage(landing, stage)
            debezium.write_stage(landing, stage)
        put_new_files(landing, remote, sent)
        output = Output(run_process(schema, remote, cluster, "--select", "staging", "current_state"))
        assert output.finish() == 0, output.text[-4000:]
    for producer, actual, expected in [
        ("dms", dms_actual(cluster, schema), dms_expected(landing)),
        ("debezium", debezium_actual(cluster, schema), debezium_expected(landing)),
    ]:
        for table, rows in expected.items():
            assert_same_table(actual[table], rows, f"cluster, landing on S3: {producer} {table}")


def dbt_pipeline_ok(lake, cluster) -> bool:
    process = run_process(lake["schema"], lake["landing"], cluster)
    output = Output(process)
    code = output.finish()
    assert code == 0, output.text[-4000:]
    return True


# ---------------------------------------------------------------- other processes at the same time


@pytest.fixture
def crm_lake(cluster, dbt, tmp_path, schema):
    """The CRM tables on the cluster after stage 1, stage 2's files landed but not applied."""
    dms.write_stage(tmp_path, 1)
    assert dbt.pipeline(*CRM, landing=tmp_path, schema=schema, target="cluster")
    dms.write_stage(tmp_path, 2)
    return tmp_path


def _assert_crm_equals_replay(cluster, schema: str, landing: Path, label: str) -> None:
    actual, expected = dms_actual(cluster, schema), dms_expected(landing)
    for table in dms.TABLES:
        assert_same_table(actual[table], expected[table], f"{label} {table}")


def test_a_dbt_show_while_a_run_is_in_the_middle_of_a_batch(cluster, crm_lake, schema):
    run = Output(run_process(schema, crm_lake, cluster, *CRM, pause=300))
    run.wait_for("pause point before_publish", 300)
    environ = {**cluster.environ, "CDC_LANDING_ROOT": str(crm_lake), "CDC_SCHEMA": schema}
    started = time.monotonic()
    show = subprocess.run(
        [
            DBT,
            "show",
            "--inline",
            "select count(*) as n from {{ ref('crm__customer_master') }}",
            "--output",
            "json",
            "--target-path",
            str(PROJECT / "target" / f"pytest-show-{schema}"),
        ],
        env=environ,
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert show.returncode == 0, show.stdout[-3000:] + show.stderr[-3000:]
    assert '"n":' in show.stdout
    assert not any("pause point before_publish of" in line and "passed" in line for line in run.lines), (
        f"the run went on before dbt show ended ({time.monotonic() - started:.0f} s): not concurrent"
    )
    assert run.process.poll() is None, "the run was still in its batch while dbt show read the table"
    release(cluster, schema)
    assert run.finish() == 0, run.text[-4000:]
    assert "released after" in run.text, "the run went on before it was released"
    _assert_crm_equals_replay(cluster, schema, crm_lake, "after the paused run")


def test_concurrent_commits_to_one_iceberg_table_lose_nothing(cluster, schema):
    """Iceberg's commit lock in the shared metastore: two sessions appending at once."""
    from pyhive import hive

    table = f"{schema}_commits.t"
    cluster.execute(f"create database if not exists {schema}_commits")
    cluster.execute(f"create table {table} (writer int, n int) using iceberg")

    def writer(number: int) -> None:
        session = hive.connect(host="127.0.0.1", port=cluster.port, username=f"writer{number}")
        try:
            for n in range(12):
                session.cursor().execute(f"insert into {table} values ({number}, {n})")
        finally:
            session.close()

    threads = [threading.Thread(target=writer, args=(w,)) for w in (1, 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
    rows = sorted(cluster.query(f"select writer, n from {table}"))
    assert rows == sorted((w, n) for w in (1, 2) for n in range(12)), "a commit was lost or doubled"
    assert len(snapshot_ids(cluster, table)) == 24
    assert cluster.locks() == 0, "a lock was left behind"


def test_two_runs_of_one_model_at_once_lose_and_double_nothing(cluster, crm_lake, schema):
    """The first run pauses with its batch appended to its own branch; a second run applies the same
    batch and publishes; the first then refuses to publish (main moved), so no row is doubled."""
    first = Output(run_process(schema, crm_lake, cluster, *CRM, pause=300))
    first.wait_for("pause point before_publish", 300)
    second = Output(run_process(schema, crm_lake, cluster, *CRM))
    assert second.finish() == 0, second.text[-4000:]
    _assert_crm_equals_replay(cluster, schema, crm_lake, "after the second run")  # no duplicate key either
    assert first.process.poll() is None, "the first run went on before the second one had published"
    release(cluster, schema)
    assert first.finish() != 0, "the first run published over the second one's commit"
    assert "another writer committed to" in first.text, first.text[-4000:]
    _assert_crm_equals_replay(cluster, schema, crm_lake, "after the refused publish")
    third = Output(run_process(schema, crm_lake, cluster, *CRM))
    assert third.finish() == 0, third.text[-4000:]
    _assert_crm_equals_replay(cluster, schema, crm_lake, "after the next run")
    assert cluster.locks() == 0


@pytest.mark.nightly  # make faults kills runs at every point on the cluster too (test_faults_cluster.py)
def test_a_run_killed_mid_batch_leaves_no_lock_that_blocks_the_next(cluster, crm_lake, schema):
    run = Output(run_process(schema, crm_lake, cluster, *CRM, pause=60))
    run.wait_for("pause point before_publish", 300)
    # The other CRM model runs on meanwhile; kill only once its batch is done, so that the kill lands
    # at the pause point and not in the middle of that model's commit (a commit the server finishes
    # holds its lock for a moment after the client is gone, which is not a lock left behind).
    run.wait_for(f"{OTHER}: applied", 300)
    os.killpg(run.process.pid, signal.SIGKILL)
    run.finish(60)
    assert locks_settle(cluster, 30) == 0, "a lock was left behind by the killed run"
    started = time.monotonic()
    again = Output(run_process(schema, crm_lake, cluster, *CRM))
    assert again.finish() == 0, again.text[-4000:]
    assert time.monotonic() - started < 240, "the next run was held up"
    _assert_crm_equals_replay(cluster, schema, crm_lake, "after the killed run and the next")
    assert cluster.locks() == 0


def test_second_process_on_the_embedded_warehouse_gets_one_line(spark, warehouse, tmp_path):
    """The embedded target (this pytest process holds its warehouse): a second process's dbt is
    refused at once, in one line naming this process, instead of hanging on Derby."""
    environ = {**os.environ, "CDC_WAREHOUSE": str(warehouse), "CDC_TARGET": "local"}
    started = time.monotonic()
    result = subprocess.run(
        [DBT, "show", "--inline", "select 1 as one", "--target-path", str(tmp_path / "target")],
        env=environ,
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert time.monotonic() - started < 120, "refused at once, not after minutes"
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert f"The embedded warehouse {warehouse} is in use by pid {os.getpid()} " in output, output[-3000:]
    assert "XSDB6" not in output and len(output) < 20_000, "no Derby stack trace"
