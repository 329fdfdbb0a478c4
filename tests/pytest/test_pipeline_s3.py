"""The pipeline with its landing zone and its warehouse on a real S3 server (SeaweedFS, helpers/s3.py):
what `CDC_LANDING_ROOT=s3a://… CDC_WAREHOUSE=s3a://… make run` does, in a process as the scheduler
starts it (helpers/fault_run.py), on the embedded target. Its Derby metastore and the hooks' state stay
on this machine (CDC_STATE_DIR); every file of every table is an object under the bucket.

The sample's DMS and Debezium stages are written to a local folder (the replay reads it) and put on S3
under the same names; the run after stage 1 builds the tables, the run after stages 2 to 4 applies the
hard cases at once. Every current-state table then equals the pure-Python replay of every raw file."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import parse_template
from helpers.paths import PROJECT, import_path
from helpers.tables import assert_same_table, normalise
from oracles.replay_debezium import replay_topic
from oracles.replay_dms import replay
from python_hooks.project import storage
from sample_data import debezium, dms
from test_debezium_pipeline import MODELS as DEBEZIUM_MODELS

pytestmark = pytest.mark.s3

SCHEMA = "ons3"
SELECT = ("--select", "staging", "current_state")


def _rows(state: dict, relation: str, key: list[str], columns: list[str]) -> dict[tuple, dict]:
    table = state["tables"][relation]
    index = {name.lower(): i for i, name in enumerate(table["columns"])}
    rows = {}
    for row in table["rows"]:
        record = {c: normalise(row[index[c.lower()]]) for c in columns}
        rows[tuple(record[c] for c in key)] = record
    assert len(rows) == len(table["rows"]), f"{relation}: a key twice"
    return rows


def test_dms_and_debezium_on_s3_equal_the_replay(tmp_path: Path, s3_server) -> None:
    landing = tmp_path / "landing"
    remote = f"s3a://{s3_server.bucket}"
    environ = {
        **os.environ,
        "PYTHONPATH": import_path(os.environ),
        "CDC_TARGET": "local",
        "CDC_WAREHOUSE": f"{remote}/warehouse",
        "CDC_STATE_DIR": str(tmp_path / "state"),
    }
    dumped = tmp_path / "dump.pickle"
    command = [sys.executable, "-m", "helpers.fault_run", "--landing", str(landing), "--land-to", f"{remote}/landing"]
    command += ["--schema", SCHEMA, "--target-path", str(tmp_path / "target"), "--dump", str(dumped)]
    command += ["--producer", "dms", "--producer", "debezium", "--stage", "1", "--stage", "2+3+4", "--", *SELECT]
    parse_template.seed(tmp_path / "target", SCHEMA, f"{remote}/landing", target_arg=None)  # the run's one parse
    done = subprocess.run(command, env=environ, cwd=PROJECT, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-4000:]}"
    assert "run 2 of 2 succeeded" in done.stdout
    with dumped.open("rb") as source:
        state = pickle.load(source)

    for table, columns in dms.TABLES.items():
        relation = f"{SCHEMA}_current.crm__{table}"
        expected = replay(landing / "dms" / "crm" / table, ["customer_id"])
        wanted = [*columns, "_cdc_op", "_cdc_ts"]
        expected = {k: {c: row.get(c) for c in wanted} for k, row in expected.items()}
        assert_same_table(_rows(state, relation, ["customer_id"], wanted), expected, f"on S3: {relation}")
    for topic, (model, columns) in DEBEZIUM_MODELS.items():
        spec = debezium.TOPICS[topic]
        wanted = [*columns, "_cdc_op", "_cdc_ts"]
        expected = replay_topic(debezium.topic_dir(landing, topic), spec["shape"], spec["key"])
        expected = {k: {c: row.get(c) for c in wanted} for k, row in expected.items()}
        actual = _rows(state, f"{SCHEMA}_current.{model}", spec["key"], wanted)
        assert_same_table(actual, expected, f"on S3: {model}")

    # Every table's files are objects under the bucket; on this machine only the metastore and the state.
    objects = [f.relative for f in storage.Location.parse(f"{remote}/warehouse").files()]
    for table in [*(f"crm__{t}" for t in dms.TABLES), *(model for model, _ in DEBEZIUM_MODELS.values())]:
        mine = [name for name in objects if name.startswith(f"{SCHEMA}_current.db/{table}/")]
        assert any(name.endswith(".parquet") and "/data/" in name for name in mine), f"{table}: no data file on S3"
        assert any(name.endswith(".metadata.json") for name in mine), f"{table}: no metadata on S3"
    local = {p.relative_to(tmp_path / "state").parts[0] for p in (tmp_path / "state").rglob("*") if p.is_file()}
    assert (
        {"metastore_db", "_python_hooks"}
        <= local
        <= {"metastore_db", "derby.log", "_python_hooks", ".embedded-session.lock"}
    ), local
