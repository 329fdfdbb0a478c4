"""Table maintenance (python_hooks/commands/maintain.py, `make maintain`) on real Spark and Iceberg tables.

One small DMS table (crm.customer_master) takes a full load and 5 CDC batches through the pipeline,
one dbt run each; the table after each batch and the snapshot that made it are recorded. Then:
an interrupted maintenance run leaves every table readable and equal to the replay; a complete one
bounds the snapshots (to `keep_last`) and the files under the table's folder (to exactly what the
retained snapshots need), and time travel to every retained snapshot still returns what it
returned before; orphan files are removed only when older than the safety interval."""

from __future__ import annotations

import datetime as dt
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from helpers import lock_holder
from helpers.paths import PROJECT
from helpers.tables import assert_same_table, normalise, table_rows
from oracles.replay_dms import replay
from python_hooks.commands import maintain as maintenance
from python_hooks.commands.maintain import Retention
from python_hooks.project import embedded_lock, env
from sample_data import dms

KEY = ["customer_id"]
COLUMNS = [*dms.TABLES["customer_master"], "_cdc_op", "_cdc_ts"]
SELECT = ("--select", "stg_crm__customer_master", "crm__customer_master")
BATCHES = 5
KEEP_LAST = 4
METADATA_VERSIONS = 5
# Everything older than now is past retention: only keep_last decides what stays.
RETENTION = Retention(days=0, keep_last=KEEP_LAST, metadata_versions=METADATA_VERSIONS)
LOADED = dt.datetime(2026, 11, 1, 8, 0, tzinfo=dt.timezone.utc)


# ---------------------------------------------------------------- data: a full load and 8 CDC files


def _customer(i: int, version: int) -> dict:
    return {
        "customer_id": i,
        "first_name": dms.FIRST[(i + version) % len(dms.FIRST)],
        "last_name": dms.LAST[i % len(dms.LAST)],
        "employer_name": dms.EMPLOYERS[(i + version) % len(dms.EMPLOYERS)],
        "email_id": f"c{i}+v{version}@example.com",
        "row_audit_ts": LOADED + dt.timedelta(hours=version),
    }


def _write(path: Path, events: list[tuple[str | None, dt.datetime, dict]], sequence: int) -> int:
    """A DMS file: Op first on CDC files, last_update_time, the columns, AR_H_CHANGE_SEQ last."""
    columns = dms.TABLES["customer_master"]
    cdc = events[0][0] is not None
    arrays = {}
    if cdc:
        arrays["Op"] = pa.array([op for op, _, _ in events], pa.string())
    arrays["last_update_time"] = pa.array([ts for _, ts, _ in events], dms.TIMESTAMP)
    for name, kind in columns.items():
        arrays[name] = pa.array([row.get(name) for _, _, row in events], kind)
    if cdc:
        seqs = []
        for _, ts, _ in events:
            sequence += 1
            seqs.append(ts.strftime("%Y%m%d%H%M%S") + f"{sequence:021d}")
        arrays["AR_H_CHANGE_SEQ"] = pa.array(seqs, pa.string())
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(arrays), path)
    return sequence


def write_batches(folder: Path) -> list[Path]:
    """LOAD00000001 (300 customers), then BATCHES CDC files: updates, inserts and a delete each.
    The batches' deleted rows stay under 10% of the table: the post-hook does not compact it, so
    maintenance finds delete files to compact."""
    rng = random.Random(13)
    live = set(range(1, 301))
    versions = dict.fromkeys(live, 0)
    paths = [folder / "LOAD00000001.parquet"]
    _write(paths[0], [(None, LOADED, _customer(i, 0)) for i in sorted(live)], 0)
    sequence, next_id = 0, 301
    for batch in range(1, BATCHES + 1):
        ts = LOADED + dt.timedelta(hours=batch)
        events = []
        for i in rng.sample(sorted(live), 4):
            versions[i] += 1
            events.append(("U", ts, _customer(i, versions[i])))
        for _ in range(2):
            versions[next_id] = 0
            live.add(next_id)
            events.append(("I", ts, _customer(next_id, 0)))
            next_id += 1
        gone = rng.choice(sorted(live - {e[2]["customer_id"] for e in events}))
        live.discard(gone)
        events.append(("D", ts, {"customer_id": gone}))
        paths.append(folder / f"{ts:%Y%m%d-%H%M%S}000.parquet")
        sequence = _write(paths[-1], events, sequence)
    return paths


# ---------------------------------------------------------------- helpers


def current(schema: str) -> str:
    return f"{schema}_current.crm__customer_master"


def rows_at(spark, relation: str, snapshot_id: int) -> dict[tuple, dict]:
    """The table as of a snapshot, key tuple -> {column: value}, like table_rows()."""
    quoted = ", ".join(f"`{c}`" for c in COLUMNS)
    result = {}
    for row in spark.sql(f"select {quoted} from {relation} version as of {snapshot_id}").collect():
        record = {c: normalise(row[c]) for c in COLUMNS}
        result[tuple(record[c] for c in KEY)] = record
    return result


def main_snapshot(spark, relation: str) -> int:
    return spark.sql(f"select snapshot_id from {relation}.refs where name = 'main'").collect()[0][0]


def snapshots(spark, relation: str) -> list[tuple[int, str]]:
    return [tuple(r) for r in spark.sql(f"select snapshot_id, operation from {relation}.snapshots").collect()]


def location(spark, relation: str) -> Path:
    rows = spark.sql(f"describe table extended {relation}").collect()
    value = next(r[1] for r in rows if r[0] == "Location")
    return Path(value.removeprefix("file:"))


def files_on_disk(folder: Path) -> set[str]:
    """Every file under a table's folder (Hadoop's hidden .crc checksum files aside)."""
    return {str(p) for p in folder.rglob("*") if p.is_file() and not p.name.endswith(".crc")}


def reachable_files(spark, relation: str) -> set[str]:
    """Every file the table's metadata refers to: data and delete files and manifests of every
    retained snapshot, the snapshots' manifest lists, the metadata files in the metadata log."""
    queries = [
        f"select file_path from {relation}.all_files",
        f"select path from {relation}.all_manifests",
        f"select manifest_list from {relation}.snapshots",
        f"select file from {relation}.metadata_log_entries",
    ]
    return {row[0].removeprefix("file:") for sql in queries for row in spark.sql(sql).collect()}


def every_table(spark, schema: str) -> list[str]:
    """The Iceberg tables of the test's schemas (the current-state table and the pipeline's own)."""
    tables = [current(schema)]
    for row in spark.sql(f"show tables in {schema}_cdc_meta").collect():
        if row[2]:
            continue  # a temporary view of a batch
        name = f"{schema}_cdc_meta.{row[1]}"
        details = {r[0]: r[1] for r in spark.sql(f"describe table extended {name}").collect()}
        if details.get("Provider") == "iceberg":
            tables.append(name)
    return tables


def open_warehouse(dbt, lake):
    from python_hooks.project.warehouse import Warehouse

    return Warehouse.open(lake["args"])


# ---------------------------------------------------------------- the lake


@pytest.fixture(scope="module")
def lake(dbt, spark, tmp_path_factory):
    landing = tmp_path_factory.mktemp("maintenance_landing")
    schema = "maintenance_lake"
    folder = landing / "dms" / "crm" / "customer_master"
    recorded = {}  # snapshot id after each run -> the table then
    started = time.monotonic()
    for path in write_batches(tmp_path_factory.mktemp("maintenance_batches") / "files"):
        folder.mkdir(parents=True, exist_ok=True)
        path.replace(folder / path.name)
        assert dbt("run", *SELECT, landing=landing, schema=schema).success, path.name
        state = table_rows(spark, current(schema), KEY, COLUMNS)
        assert_same_table(state, replay(folder, KEY), f"after {path.name}")
        recorded[main_snapshot(spark, current(schema))] = state
    args = [*dbt._common(landing, schema), "--target", "local"]
    parsed = dbt("parse", landing=landing, schema=schema)
    assert parsed.success
    relation = current(schema)
    print(f"\n{BATCHES + 1} runs in {time.monotonic() - started:.0f} s")
    return {
        "landing": landing,
        "schema": schema,
        "folder": folder,
        "args": args,
        "manifest": parsed.result,
        "recorded": recorded,
        "snapshots_before": snapshots(spark, relation),
        "files_before": files_on_disk(location(spark, relation)),
    }


def run_maintain(dbt, lake, **options):
    with open_warehouse(dbt, lake) as warehouse:
        return maintenance.maintain(
            warehouse, lake["manifest"], runner=dbt._runner, dbt_args=lake["args"], retention=RETENTION, **options
        )


def assert_every_table_readable(spark, lake, label: str) -> None:
    schema = lake["schema"]
    assert_same_table(
        table_rows(spark, current(schema), KEY, COLUMNS), replay(lake["folder"], KEY), f"{label}: current state"
    )
    ledger = spark.sql(f"select file_name from {schema}_cdc_meta.cdc_file_ledger").collect()
    assert sorted(r[0] for r in ledger) == sorted(p.name for p in lake["folder"].iterdir()), f"{label}: ledger"
    for table in every_table(spark, schema):
        spark.table(table).collect()  # every file of every table still there


# ---------------------------------------------------------------- the tests


def delete_files(spark, relation: str) -> int:
    return spark.sql(f"select count(*) from {relation}.files where content <> 0").collect()[0][0]


def test_interrupted_maintenance_leaves_every_table_readable(lake, dbt, spark, monkeypatch):
    """Maintenance killed midway (here: after the first table was compacted, its manifests
    rewritten, its old metadata bounded and its snapshots expired, before its orphan files and
    every other table): every table reads and equals the replay; the next complete run is the
    next test."""
    relation = current(lake["schema"])
    before = {sid for sid, _ in snapshots(spark, relation)}
    assert delete_files(spark, relation) > 0, "the batches left position deletes to compact"
    calls = []

    def interrupted(warehouse, relation, older_than):
        calls.append(relation)
        raise KeyboardInterrupt("maintenance killed")

    monkeypatch.setattr(maintenance, "remove_orphan_files", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_maintain(dbt, lake)
    assert calls == ["`maintenance_lake_current`.`crm__customer_master`"], calls
    after = {sid for sid, _ in snapshots(spark, relation)}
    assert len(after) == KEEP_LAST and before - after, "the first table's expiry ran before the interruption"
    assert delete_files(spark, relation) == 0, "compacted by cdc_compact_current_state"
    assert "replace" in {operation for sid, operation in snapshots(spark, relation) if sid not in before}
    assert_every_table_readable(spark, lake, "interrupted")
    assert main_snapshot(spark, relation) in after


def test_maintain_bounds_snapshots_and_files_and_keeps_time_travel(lake, dbt, spark):
    """A complete run after the interrupted one: the table keeps exactly `keep_last` snapshots,
    every file under its folder is one the retained snapshots need (old metadata files included),
    time travel to each retained snapshot returns what that snapshot returned before, and to an
    expired one fails."""
    schema = lake["schema"]
    relation = current(schema)
    report = run_maintain(dbt, lake)
    print("\n" + "\n".join(t.line() for t in report.tables) + "\n" + report.summary())
    assert report.ok, [t.line() for t in report.tables]
    lines = {t.table: t for t in report.tables}
    assert set(lines) >= {
        f"{schema}_current.crm__customer_master",
        f"{schema}_cdc_meta.cdc_file_ledger",
        f"{schema}_cdc_meta.cdc_tombstones",
    }
    assert lines[f"{schema}_current.crm__customer_address"].skipped == "not created yet"
    assert not any(name.startswith(f"{schema}_cdc_meta.landing__") for name in lines), "binaryFile listings"
    assert report.target == "local" and report.warehouse.endswith(os.environ["CDC_WAREHOUSE"])

    kept = snapshots(spark, relation)
    assert len(kept) == KEEP_LAST, kept
    # every run committed at least once (a small table's batch is one MERGE on this target)
    assert len(lake["snapshots_before"]) >= BATCHES + 1 > KEEP_LAST, lake["snapshots_before"]
    for name in (f"{schema}_cdc_meta.cdc_file_ledger", f"{schema}_cdc_meta.cdc_tombstones"):
        assert len(snapshots(spark, name)) <= KEEP_LAST, name

    folder = location(spark, relation)
    on_disk = files_on_disk(folder)
    reachable = reachable_files(spark, relation)
    assert on_disk == reachable, (
        f"not needed: {sorted(on_disk - reachable)[:5]}, missing: {sorted(reachable - on_disk)[:5]}"
    )
    metadata = [p for p in on_disk if p.endswith(".metadata.json")]
    assert len(metadata) <= METADATA_VERSIONS + 1, metadata
    before = lake["files_before"]
    print(
        f"\n{relation}: snapshots {len(lake['snapshots_before'])} -> {len(kept)}; files {len(before)} -> {len(on_disk)}"
        f" (data+delete {sum('/data/' in p for p in before)} -> {sum('/data/' in p for p in on_disk)},"
        f" metadata {sum('/metadata/' in p for p in before)} -> {sum('/metadata/' in p for p in on_disk)})"
    )
    assert len(on_disk) < len(before)
    assert len(metadata) < sum(p.endswith(".metadata.json") for p in before)

    expected = replay(lake["folder"], KEY)
    recorded = lake["recorded"]
    checked = 0
    for snapshot_id, _ in kept:
        state = rows_at(spark, relation, snapshot_id)
        if snapshot_id in recorded:
            assert_same_table(state, recorded[snapshot_id], f"time travel to {snapshot_id}")
            checked += 1
        elif snapshot_id not in {s for s, _ in lake["snapshots_before"]}:  # made by maintenance: same rows
            assert_same_table(state, expected, f"maintenance snapshot {snapshot_id}")
    assert checked >= 1, "the last batch's snapshot is among the retained ones"
    first = next(iter(recorded))
    with pytest.raises(Exception, match=str(first)):
        spark.sql(f"select * from {relation} version as of {first}").collect()
    assert_every_table_readable(spark, lake, "after maintain")


def test_orphan_files_are_removed_only_past_the_safety_interval(lake, dbt, spark):
    """A Parquet file in the table's data folder that no snapshot refers to: removed when older
    than the interval (3 days), kept when fresh (a run may be about to commit it). Iceberg's
    procedure refuses an interval under 24 hours; so does remove_orphan_files, in one line."""
    relation = current(lake["schema"])
    data = location(spark, relation) / "data"
    old, fresh = data / "orphan-old.parquet", data / "orphan-fresh.parquet"
    for path in (old, fresh):
        pq.write_table(pa.table({"customer_id": pa.array([1], pa.int64())}), path)
    four_days_ago = time.time() - 4 * 86400
    os.utime(old, (four_days_ago, four_days_ago))
    now = dt.datetime.now(dt.timezone.utc)
    try:
        with open_warehouse(dbt, lake) as warehouse:
            with pytest.raises(ValueError, match="older than 24 hours"):
                maintenance.remove_orphan_files(warehouse, relation, now - dt.timedelta(hours=1))
            assert old.exists() and fresh.exists()
            removed = maintenance.remove_orphan_files(warehouse, relation, now - maintenance.ORPHAN_INTERVAL)
        assert removed == 1
        assert not old.exists() and fresh.exists()
        # Iceberg's own refusal (1.9.2 to 1.12.0), for the record (docs/schedule.md)
        with pytest.raises(Exception, match="Cannot remove orphan files with an interval less than 24 hours"):
            spark.sql(
                f"call spark_catalog.system.remove_orphan_files(table => '{relation}',"
                f" older_than => timestamp '{(now - dt.timedelta(hours=23)):%Y-%m-%d %H:%M:%S}+00:00')"
            ).collect()
        assert fresh.exists()
    finally:
        fresh.unlink(missing_ok=True)
    assert_every_table_readable(spark, lake, "after orphan removal")


def test_retention_comes_from_model_config(dbt, tmp_path):
    """`+cdc_retention` in dbt_project.yml reaches every Iceberg model and snapshot; views are not
    maintained; the pipeline's own tables take the default (no Spark: the manifest alone)."""
    parsed = dbt("parse", landing=tmp_path, schema="plan")
    assert parsed.success
    targets = {t.name: t for t in maintenance.maintenance_targets(parsed.result, "m_cdc_meta", ["cdc_tombstones"])}
    project = Retention(days=7, keep_last=10, metadata_versions=20)
    assert targets["plan_current.crm__customer_master"].retention == project
    assert targets["plan_current.crm__customer_master"].kind == "current_state"
    assert targets["plan_snapshots.customer_snapshot"].retention == project
    assert targets["plan_snapshots.customer_snapshot"].kind == "snapshot"
    assert targets["plan_intermediate.int_customer__joined"].kind == "table"
    assert targets["plan_history.sales_order_change_log"].kind == "table"
    assert "plan_marts.dim_customer" not in targets, "a view"
    assert not any("_staging." in name for name in targets)
    assert targets["m_cdc_meta.cdc_tombstones"].retention == Retention()
    assert targets["m_cdc_meta.cdc_tombstones"].kind == "meta"


def test_maintain_command_is_refused_in_one_line_while_the_embedded_warehouse_is_in_use(tmp_path):
    """Another process has the embedded warehouse (here a small one that holds its lock, as every Spark
    session of the project does first): `python -m python_hooks maintain` on it says so in one line
    naming that process, and its JVM never touches Derby (no metastore is created).

    The warehouse is the test's own, not this pytest process's: the run's session is shared by every
    test, and what earlier tests left in os.environ must not decide where the child looks."""
    warehouse = tmp_path / "warehouse"
    warehouse.mkdir()
    with lock_holder.holding(warehouse) as holder:
        environ = {
            **{k: v for k, v in os.environ.items() if k not in (env.DERIVED, env.DEFAULTED, *env.S3_VARIABLES)},
            "CDC_TARGET": "local",
            "CDC_WAREHOUSE": str(warehouse),
            "CDC_STATE_DIR": str(warehouse),
            "DBT_PROFILES_DIR": str(PROJECT / "profiles"),
            "DBT_TARGET_PATH": str(tmp_path / "target"),
            "DBT_LOG_PATH": str(tmp_path / "logs"),
        }
        done = subprocess.run(
            [sys.executable, "-m", "python_hooks", "maintain"],
            env=environ,
            capture_output=True,
            text=True,
            timeout=180,
            cwd=PROJECT,
        )
    assert done.returncode == 1, done.stdout + done.stderr
    refusal = [line for line in done.stderr.splitlines() if "maintenance refused" in line]
    assert len(refusal) == 1, f"{done.stdout[:1500]}\n{done.stderr[-2000:]}"
    assert f"in use by pid {holder.pid} " in refusal[0]
    assert "Traceback" not in done.stderr
    assert sorted(p.name for p in warehouse.iterdir()) == [embedded_lock.LOCK_NAME], "Derby untouched"


def test_a_loop_maintains_in_its_own_process_between_its_runs(dbt, spark, tmp_path, schema):
    """`run --every S --maintain-every M` (python_hooks/cli.py): each turn of the loop is its run, then, when due,
    `maintain` in the loop's own process and Spark session (on the embedded target the loop holds the warehouse,
    so `make maintain` beside it is refused, as the test above shows). Two turns, maintenance due at each
    (`every` 0): each maintenance finds what the run left and compacts it (no delete file after it), the next run
    applies its files on the maintained table, and the table equals the replay after each turn."""
    from python_hooks.commands import loop
    from python_hooks.commands.maintain import run_maintenance

    landing = tmp_path / "landing"
    relation = f"{schema}_current.crm__customer_master"
    target_options = [*dbt._common(landing, schema), "--target", "local"]
    deletes = []

    def run_once() -> bool:
        return dbt.pipeline(*SELECT, landing=landing, schema=schema)

    def maintain_once() -> bool:
        before = delete_files(spark, relation)
        ok = run_maintenance(target_options)
        deletes.append((before, delete_files(spark, relation)))
        return ok

    turn = loop.with_maintenance(run_once, maintain_once, 0.0)
    for stage in (1, 2):
        dms.write_stage(landing, stage)
        assert turn(), f"turn {stage}: the run or the maintenance failed"
        expected = replay(landing / "dms" / "crm" / "customer_master", KEY)
        assert_same_table(table_rows(spark, relation, KEY, COLUMNS), expected, f"after turn {stage}")
    assert len(deletes) == 2, deletes
    assert all(after == 0 for _, after in deletes), f"maintenance left delete files: {deletes}"
    assert deletes[1][0] > 0, f"the second run's updates and deletes left no delete file to compact: {deletes}"
