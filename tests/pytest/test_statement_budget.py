"""What a run costs, counted (issue 42): the SQL statements `make run` sends to Spark, per dbt node and for
the run's own work (hooks, plan, accounting), and the commits it makes, from every table's snapshots.
Counts, not timings: they cannot flake. The ceilings live in BUDGET, beside the issue's goal.

Four tables (crm.customer_master and crm.customer_address from DMS, salesdb.customer from Debezium flattened,
inventory.product from Debezium's full envelope) are built from the sample's first stage; then one run applies the
next stage (one small file each), and one run finds nothing new."""

from __future__ import annotations

import contextlib
import io
import re
import shutil
import threading
from collections import Counter
from pathlib import Path

from pyspark.errors import AnalysisException

from bench.instrument import SqlProfile
from helpers.runs import assert_batch_log, batch_log
from helpers.tables import assert_same_table, table_rows
from oracles.replay_counts import debezium_counts, dms_counts
from oracles.replay_debezium import replay_topic
from oracles.replay_dms import replay
from python_hooks.commands import run as run_command
from python_hooks.project.storage import Location
from sample_data import debezium, dms

TABLES = ["crm__customer_master", "crm__customer_address", "salesdb__customer", "inventory__product"]
PRODUCT_COLUMNS = ["product_id", "name", "price", "in_stock"]
SELECT = (
    "--select",
    *(f"stg_{t}" for t in TABLES),
    *TABLES,
)
# The ceilings this test holds, measured on 2026-11-28 (the goal beside each): a ratchet, lowered as
# the engine gets there; one is raised only when work per table moves into one statement of the run (the
# tables' states: each node -1, the run +1; their snapshots for the batch log: a listing, where the batch log's
# INSERT loaded every table's metadata, 20 tables 1.0-1.4 s against 0.25-0.3 s). Statements as dbt sends them
# (bench/instrument.py: SqlProfile); commits from the tables' snapshots.
BUDGET = {
    "node statements": 2,  # per current-state model node (aggregate, MERGE); goal 4 (dbt metadata included)
    "table commits": 1,  # per applied table: its MERGE (a small table is not compacted for its deletes); goal 1
    "accounting commits": 1,  # the ledger's and the batch log's, once per run (commands/accounting.py); goal 1
    "tombstone commits": 1,  # once per run (the batches hand them over as literals, or spool them); goal 1
    "test statements": 1,  # per applied table, its data tests (the batch checks what it guarantees); goal 1
    # hooks (their listings serve dbt's relation cache and the tables' states), accounting; the run's table reads none
    "run statements": 8,  # goal 8
    "idle statements": 2,  # the meta tables' listing (they exist, their snapshots), the current schema's tables; goal 3
    # per landing folder per run, also with nothing new: the hooks list it once (what waits, the batch's files, the
    # schema hook, the empty files all read that listing); on S3 each listing is a request per 1,000 files
    "folder listings": 1,
}


def _land(landing: Path, stage: int) -> list[Path]:
    """The stage's files of every table of the test: the files it wrote. The envelope's stages run one ahead
    (its first run takes its stages 1 and 2), so that the counted run applies its stage 4, one small file as
    the others': its stage 3 holds a truncate, which is a commit of its own (macros/cdc/merge.sql, 4b)."""
    written = [*dms.write_stage(landing, stage), *_topic_stage(landing, stage, debezium.CUSTOMER)]
    for product_stage in [1, 2] if stage == 1 else [stage + 1]:
        written.extend(_topic_stage(landing, product_stage, debezium.PRODUCT))
    return written


def _topic_stage(landing: Path, stage: int, topic: str) -> list[Path]:
    """One topic's files of one stage (sample_data writes every topic's at once: into a folder aside, then
    copied, their times kept)."""
    aside = landing.parent / f"debezium_stage_{stage}"
    if not aside.exists():
        debezium.write_stage(aside, stage)
    source, target = debezium.topic_dir(aside, topic), debezium.topic_dir(landing, topic)
    copied = []
    for path in sorted(source.rglob("*.parquet")):
        copied.append(target / path.relative_to(source))
        copied[-1].parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, copied[-1])
    return copied


def _assert_batch_log_equals_replay(spark, landing: Path, schema: str, stages: list[list[Path]]) -> None:
    """The batch log `make run` wrote once per run (python_hooks/commands/accounting.py), one row per table
    per run that applied a file, against the replay's counts of the same batches."""
    logged = batch_log(spark, schema)
    for table in dms.TABLES:
        folder = landing / "dms" / "crm" / table
        files = [{p.name for p in written if p.parent == folder} for written in stages]
        assert_batch_log(logged[f"crm__{table}"], dms_counts(folder, ["customer_id"], files), table)
    for topic, model in ((debezium.CUSTOMER, "salesdb__customer"), (debezium.PRODUCT, "inventory__product")):
        topic_dir, spec = debezium.topic_dir(landing, topic), debezium.TOPICS[topic]
        files = [{p.name for p in written if topic_dir in p.parents} for written in stages]
        expected = debezium_counts(topic_dir, spec["shape"], spec["key"], files)
        assert_batch_log(logged[model], expected, topic)


def _commits(spark, schema: str) -> Counter:
    """Snapshots per table of the run's schemas (the current-state tables and the meta tables)."""
    counts = Counter()
    for suffix in ("current", "cdc_meta"):
        for row in spark.sql(f"show tables in {schema}_{suffix}").collect():
            relation = f"{schema}_{suffix}.{row.tableName}"
            if row.isTemporary:
                continue
            try:
                counts[relation] = spark.sql(f"select count(*) from {relation}.snapshots").collect()[0][0]
            except AnalysisException:  # not an Iceberg table (a Parquet table over a landing folder)
                continue
    return counts


def _counted_run(dbt, spark, landing: Path, schema: str, listings: Counter | None = None) -> tuple[list, Counter]:
    """The run's statements and its commits per table; `listings` (a Counter that Location.files adds to,
    see _count_listings) is emptied first, so that it then holds this run's listings per folder."""
    before = _commits(spark, schema)
    profile = SqlProfile()
    # as `make run` runs, with its progress lines and the table that ends it (commands/run.py: report): counted too
    said = io.StringIO()
    progress = run_command.Progress(stream=said)
    dbt._runner.callbacks.extend([profile, progress])
    if listings is not None:
        listings.clear()
    try:
        with contextlib.redirect_stdout(said):
            assert dbt.pipeline(*SELECT, landing=landing, schema=schema)
    finally:
        dbt._runner.callbacks.remove(profile)
        dbt._runner.callbacks.remove(progress)
    assert "this run (" in said.getvalue(), said.getvalue()
    after = _commits(spark, schema)
    return profile.statements, Counter({t: after[t] - before.get(t, 0) for t in after if after[t] != before.get(t, 0)})


def _count_listings(monkeypatch) -> Counter:
    """Every listing of a folder (project/storage.py: Location.files, the one seam the Python side lists
    through), counted per folder; the listing itself is the real one."""
    listings = Counter()
    real = Location.files

    def files(self: Location):
        listings[str(self)] += 1
        return real(self)

    monkeypatch.setattr(Location, "files", files)
    return listings


def _per_node(statements: list) -> Counter:
    return Counter(s.node or "(run)" for s in statements)


def test_statements_and_commits_of_a_small_run(dbt, spark, tmp_path: Path, schema: str, monkeypatch) -> None:
    # The plan handed in one part per table (a run of hundreds of tables takes several parts): the budget holds
    # only if the macros read every part (macros/cdc/landing.sql: cdc_run_plan).
    handed_parts = []

    def one_table_per_part(plan: dict) -> list[dict]:
        handed_parts.append(len(plan))
        return [{identifier: entry} for identifier, entry in plan.items()]

    monkeypatch.setattr(run_command, "plan_parts", one_table_per_part)
    landing = tmp_path / "landing"
    stages = [_land(landing, 1)]
    assert dbt.pipeline(*SELECT, landing=landing, schema=schema)
    stages.append(_land(landing, 2))  # the first run after the tables were made: the ledger is read (then cached)
    assert dbt.pipeline(*SELECT, landing=landing, schema=schema)
    stages.append(_land(landing, 3))  # counted: a run as every later one
    listings = _count_listings(monkeypatch)
    statements, commits = _counted_run(dbt, spark, landing, schema, listings)
    run_listings = dict(listings)
    assert handed_parts[-1] == len(TABLES), handed_parts  # the counted run's plan: a part per table
    for table in dms.TABLES:  # the run is right, not only cheap
        expected = replay(landing / "dms" / "crm" / table, ["customer_id"])
        actual = table_rows(
            spark, f"{schema}_current.crm__{table}", ["customer_id"], [*dms.TABLES[table], "_cdc_op", "_cdc_ts"]
        )
        assert_same_table(actual, expected, table)
    product = debezium.TOPICS[debezium.PRODUCT]  # the envelope's columns, which the batch took from the run's plan
    actual = table_rows(
        spark, f"{schema}_current.inventory__product", product["key"], [*PRODUCT_COLUMNS, "_cdc_op", "_cdc_ts"]
    )
    expected = replay_topic(debezium.topic_dir(landing, debezium.PRODUCT), product["shape"], product["key"])
    assert_same_table(actual, expected, debezium.PRODUCT)
    for table in TABLES:  # the batch log's snapshot_id: the table's snapshot once the run is done (time travel)
        relation = f"{schema}_current.{table}"
        newest = spark.sql(
            f"select snapshot_id from {schema}_cdc_meta.cdc_batch_log where model_name = '{table}'"
            " order by started_at desc limit 1"
        ).collect()[0][0]
        assert newest == spark.sql(f"select snapshot_id from {relation}.refs where name = 'main'").collect()[0][0]
        # its ledger rows say when the batch ended (after the table's commit, before its batch log row's end),
        # not when the run recorded them after its build: what `live demo` measures latency by
        meta = f"{schema}_cdc_meta"
        committed, finished, first, last = spark.sql(
            f"select s.committed_at, b.finished_at, min(l.applied_at), max(l.applied_at)"
            f" from {meta}.cdc_batch_log as b join {relation}.snapshots as s on s.snapshot_id = b.snapshot_id"
            f" join {meta}.cdc_file_ledger as l on l.invocation_id = b.run_id and l.model_name = b.model_name"
            f" where b.model_name = '{table}' and b.snapshot_id = {newest} group by 1, 2"
        ).collect()[0]
        assert committed <= first <= last <= finished, (table, committed, first, last, finished)
    nodes = _per_node(statements)
    idle_statements, idle_commits = _counted_run(dbt, spark, landing, schema, listings)
    idle_listings = dict(listings)
    _assert_batch_log_equals_replay(spark, landing, schema, stages)  # counted once per run, and the idle run added none
    for sql in [*statements, None, *idle_statements]:  # shown with -s, and in the log of a failure
        print("--- idle run" if sql is None else f"  {sql.node.split('.')[-1] or '(run)'} | {_text(sql.sql)[:200]}")

    tests = Counter()
    for node, count in nodes.items():
        if node.startswith("test."):
            tests[next((t for t in TABLES if f"_{t}_" in node and "_stg_" not in node), "staging")] += count
    run_own = sum(n for node, n in nodes.items() if not node.startswith(("model.", "test.", "snapshot.")))
    measured = {
        "node statements": max(nodes[f"model.cdc_lakehouse.{t}"] for t in TABLES),
        "table commits": max(commits[f"{schema}_current.{t}"] for t in TABLES),
        "accounting commits": max(commits[f"{schema}_cdc_meta.{t}"] for t in ("cdc_batch_log", "cdc_file_ledger")),
        "tombstone commits": commits[f"{schema}_cdc_meta.cdc_tombstones"],
        "test statements": max(tests[t] for t in TABLES),
        "run statements": run_own,
        "idle statements": len(idle_statements),
        "folder listings": max([*run_listings.values(), *idle_listings.values()]),
    }
    print("measured:", measured, "commits:", dict(commits), "listings:", run_listings, idle_listings)
    folders = {str(Location.parse(landing / "dms" / "crm" / t)) for t in dms.TABLES}
    assert folders <= set(run_listings), ("each folder is listed", run_listings)
    assert all(commits[f"{schema}_current.{t}"] >= 1 for t in TABLES), commits  # every table took its file
    for meta in ("cdc_batch_log", "cdc_file_ledger"):  # recorded, once for the whole run
        assert commits[f"{schema}_cdc_meta.{meta}"] == 1, commits
    over = {name: (measured[name], ceiling) for name, ceiling in BUDGET.items() if measured[name] > ceiling}
    assert not over, f"over budget (measured, ceiling): {over}"
    assert not idle_commits, f"a run with nothing new committed: {dict(idle_commits)}"
    assert not [s for s in idle_statements if s.node], "a run with nothing new ran dbt nodes"


def _text(sql: str) -> str:
    return re.sub(r"^/\*.*?\*/\s*", "", " ".join(sql.split()))


# A write statement and the table it writes (a spool folder, `insert overwrite directory`, is no table).
WRITE = re.compile(
    r"^(?:merge into|insert into|delete from|update|alter table|create table|create or replace table|drop table"
    r"|truncate table|replace table)\s+(?:if (?:not )?exists\s+)?(\S+)|rewrite_data_files\(table => '([^']+)'",
    re.IGNORECASE,
)


def test_models_build_at_once_and_each_commits_only_its_own_table(
    dbt, spark, tmp_path: Path, schema: str, monkeypatch
) -> None:
    """`make run` on the embedded target builds with 2 threads (commands/run.py: _threads): every
    current-state model waits just before its MERGE (the pause point before_publish) until this test
    creates a database, which it does once two models wait at once. With one thread the first wait runs
    out (5 minutes), no two ever wait together, and this fails. Every write statement of a model node
    names the model's own table; the meta tables are committed once, after the build."""
    landing = tmp_path / "landing"
    _land(landing, 1)
    assert dbt.pipeline(*SELECT, landing=landing, schema=schema)
    _land(landing, 2)
    release = f"{schema}_released"
    monkeypatch.setenv("CDC_PAUSE_AT", "before_publish")  # every model waits there until the release
    monkeypatch.setenv("CDC_PAUSE_SECONDS", "300")
    monkeypatch.setenv("CDC_PAUSE_RELEASE", release)
    seen: list[str] = []
    held: set[str] = set()

    def watch(msg) -> None:  # in the thread of the node that sends it
        message = str(getattr(msg.data, "msg", ""))
        if msg.info.name not in ("JinjaLogInfo", "JinjaLogDebug") or "pause point before_publish of " not in message:
            return
        relation = message.split("pause point before_publish of ", 1)[1].split(" ", 1)[0]
        if " reached" in message:
            if held and not seen:  # a second model at its MERGE while another waits at its own: at once
                seen.append(relation)
                threading.Thread(target=spark.sql, args=(f"create database if not exists {release}",)).start()
            held.add(relation)
        else:
            held.discard(relation)

    before = _commits(spark, schema)
    profile = SqlProfile()
    dbt._runner.callbacks.extend([profile, watch])
    try:
        assert dbt.pipeline(*SELECT, landing=landing, schema=schema)
    finally:
        dbt._runner.callbacks.remove(profile)
        dbt._runner.callbacks.remove(watch)
        spark.sql(f"drop database if exists {release}")
    after = _commits(spark, schema)

    assert seen, "no two models were at their MERGE at once: the models were built one by one"
    for table in dms.TABLES:  # the tables are right, not only built at once
        expected = replay(landing / "dms" / "crm" / table, ["customer_id"])
        actual = table_rows(
            spark, f"{schema}_current.crm__{table}", ["customer_id"], [*dms.TABLES[table], "_cdc_op", "_cdc_ts"]
        )
        assert_same_table(actual, expected, table)
    foreign = []
    for statement in profile.statements:
        model = statement.node.rsplit(".", 1)[-1]
        if not statement.node.startswith("model.") or model not in TABLES:
            continue
        for match in WRITE.finditer(_text(statement.sql)):
            written = (match.group(1) or match.group(2)).replace("`", "")
            if written != f"{schema}_current.{model}":
                foreign.append((model, written, _text(statement.sql)[:120]))
    assert not foreign, f"a model node wrote another table than its own: {foreign}"
    commits = {t: after[t] - before.get(t, 0) for t in after if after[t] != before.get(t, 0)}
    for meta in ("cdc_batch_log", "cdc_file_ledger", "cdc_tombstones"):  # after the build, once for all
        assert commits.get(f"{schema}_cdc_meta.{meta}", 0) <= 1, commits
