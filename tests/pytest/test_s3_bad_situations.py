"""Bad situations on S3, at the level of `python -m python_hooks run` (what `make run` and a scheduler
start), on a real S3 server (SeaweedFS, helpers/s3.py) with the landing zone and the warehouse on it,
on the embedded target: each says one line naming what to check, and loses nothing.

- Keys refused, the endpoint down, a bucket missing: the run stops before Spark starts (one request per
  S3 location, python_hooks/project/storage.py: Location.check), exits non-zero with one line, no
  traceback and no secret, and has created nothing (no object under the warehouse, no metastore).
- A 0-byte object: its table is refused with one line, the other table builds; replaced by the
  complete file under the same name, it is applied.
- An upload still in progress (a multipart upload started, not completed): S3 does not list it, so the
  run does not see it; once completed, the next run applies it.
- An object deleted between the run's listing and the batch's read (a lifecycle rule): the batch fails
  with one line naming the file and writes nothing; the next run applies the files still there.

Every table the runs applied equals the pure-Python replay of the raw files on S3 (oracles/replay_dms.py).
"""

from __future__ import annotations

import datetime as dt
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from helpers import parse_template
from helpers.paths import PROJECT, import_path
from helpers.s3 import Server, free_port_block
from helpers.tables import assert_same_table, normalise
from oracles.replay_dms import replay
from python_hooks.project import object_store, storage
from sample_data import dms

pytestmark = pytest.mark.s3

SELECT = ("--select", "staging.crm", "current_state.crm")
KEY = ["customer_id"]
EMPTY = "20261102-091500000.parquet"  # customer_address: a 0-byte object, then its complete file
GONE = "20261102-091500000.parquet"  # customer_master: deleted after the run listed it
UPLOADING = "20261102-100000000.parquet"  # customer_master: a multipart upload in progress
PART = 11 << 20  # more than pyarrow's S3 part (10 MiB): the upload is a multipart one, open until closed


def _environ(tmp_path: Path, remote: str, schema: str, **changed: str) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": import_path(os.environ),
        "CDC_TARGET": "local",
        "CDC_SCHEMA": schema,
        "CDC_LANDING_ROOT": f"{remote}/landing",
        "CDC_WAREHOUSE": f"{remote}/warehouse",
        "CDC_STATE_DIR": str(tmp_path / "state"),
        **changed,
    }


def _run_command(environ: dict[str, str], target: Path) -> list[str]:
    """`python -m python_hooks run` of the module's tables into `target`, which starts from the pytest run's one
    parse (helpers/parse_template.py)."""
    parse_template.seed(target, environ["CDC_SCHEMA"], environ["CDC_LANDING_ROOT"], target_arg=None)
    return [sys.executable, "-m", "python_hooks", "run", *SELECT, "--target-path", str(target)]


def _run(environ: dict[str, str], target: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    command = _run_command(environ, target)
    return subprocess.run(command, env=environ, cwd=PROJECT, capture_output=True, text=True, timeout=timeout)


def _said(done: subprocess.CompletedProcess) -> str:
    return f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-4000:]}"


def _errors(done: subprocess.CompletedProcess) -> list[str]:
    """The lines the run logged as errors (shown with pytest -s)."""
    errors = [line for line in (done.stdout + done.stderr).splitlines() if line.startswith("ERROR")]
    print(*errors, sep="\n")
    return errors


def test_wrong_keys_endpoint_down_and_missing_bucket_are_one_line_and_change_nothing(s3_server: Server, tmp_path):
    remote = f"s3a://{s3_server.bucket}"
    local = tmp_path / "landing"
    dms.write_stage(local, 1)
    for path in sorted(local.rglob("*.parquet")):
        storage.upload(path, storage.Location.parse(f"{remote}/landing").join(path.relative_to(local).as_posix()))
    endpoint, secret = s3_server.endpoint, s3_server.variables["AWS_SECRET_ACCESS_KEY"]
    down = f"http://127.0.0.1:{free_port_block()}"
    missing = f"no-such-bucket-{s3_server.bucket}"
    situations = {
        "wrong keys": (
            {"AWS_SECRET_ACCESS_KEY": "not-the-secret"},
            f"S3 at {endpoint} refused bucket {s3_server.bucket} (ACCESS_DENIED) with the keys of AWS_ACCESS_KEY_ID"
            " / AWS_SECRET_ACCESS_KEY: check both variables (and AWS_REGION)",
        ),
        "endpoint down": (
            {"AWS_ENDPOINT_URL_S3": down},
            f"S3 at {down} does not answer (reading {remote}/landing): check AWS_ENDPOINT_URL_S3 (or"
            " AWS_ENDPOINT_URL); for the local server, make s3-up",
        ),
        "landing bucket missing": (
            {"CDC_LANDING_ROOT": f"s3a://{missing}/landing"},
            f"bucket {missing} does not exist at {endpoint} (reading s3a://{missing}/landing): check the landing"
            " root (CDC_LANDING_ROOT, or the source's identifier) and CDC_S3_BUCKET, or create the bucket",
        ),
        "warehouse bucket missing": (
            {"CDC_WAREHOUSE": f"s3a://{missing}/warehouse"},
            f"bucket {missing} does not exist at {endpoint} (reading s3a://{missing}/warehouse): check the"
            " warehouse (CDC_WAREHOUSE) and CDC_S3_BUCKET, or create the bucket",
        ),
    }
    for situation, (changed, line) in situations.items():
        done = _run(_environ(tmp_path, remote, "bad", **changed), tmp_path / "target", timeout=120)
        assert done.returncode == 1, f"{situation}: {_said(done)}"
        assert _errors(done) == [f"ERROR: {line}"], f"{situation}: {_said(done)}"
        output = done.stdout + done.stderr
        assert "Traceback" not in output and "\tat " not in output and "Exception" not in output, situation
        assert secret not in output and "not-the-secret" not in output, situation
    # Nothing was made: no object under the warehouse, no metastore on this machine, the landing as it was.
    assert storage.Location.parse(f"{remote}/warehouse").files() == []
    assert not (tmp_path / "state").exists()
    assert len(storage.Location.parse(f"{remote}/landing").files()) == 3


def _big_insert(path: Path) -> None:
    """A DMS CDC file of customer_master with one insert whose employer_name is PART random characters
    (not compressed): larger than one part of an S3 upload."""
    columns = dms.TABLES["customer_master"]
    at = dt.datetime(2026, 11, 2, 10, 0, tzinfo=dt.timezone.utc)
    row = {name: None for name in columns} | {
        "customer_id": 500,
        "first_name": "Big",
        "employer_name": os.urandom(PART // 2).hex(),
        "row_audit_ts": at,
    }
    arrays = {"Op": pa.array(["I"]), "last_update_time": pa.array([at], dms.TIMESTAMP)}
    arrays |= {name: pa.array([row[name]], kind) for name, kind in columns.items()}
    arrays["AR_H_CHANGE_SEQ"] = pa.array(["20261102100000000000000000000000001"])
    pq.write_table(pa.table(arrays), path, compression="none")


def _metadata_files(remote: str, schema: str, table: str) -> list[str]:
    folder = storage.Location.parse(f"{remote}/warehouse/{schema}_current.db/{table}/metadata")
    return sorted(f.relative for f in folder.files())


def _rows(state: dict, relation: str, columns: list[str]) -> dict[tuple, dict]:
    table = state["tables"][relation]
    index = {name.lower(): i for i, name in enumerate(table["columns"])}
    rows = {
        tuple(normalise(row[index[c]]) for c in KEY): {c: normalise(row[index[c]]) for c in columns}
        for row in table["rows"]
    }
    assert len(rows) == len(table["rows"]), f"{relation}: a key twice"
    return rows


def test_empty_object_upload_in_progress_and_object_deleted_meanwhile(s3_server: Server, tmp_path, request):
    remote, schema = f"s3a://{s3_server.bucket}/situations", "s3bad"  # a prefix of its own
    landing = storage.Location.parse(f"{remote}/landing")
    local = tmp_path / "landing"  # what is on S3, as the replay reads it
    dms.write_stage(local, 1)
    for path in sorted(local.rglob("*.parquet")):
        storage.upload(path, landing.join(path.relative_to(local).as_posix()))
    master, address = local / "dms/crm/customer_master", local / "dms/crm/customer_address"
    s3 = object_store.filesystem_from_env()
    # A 0-byte object in customer_address; a multipart upload started in customer_master, not completed.
    landing.join(f"dms/crm/customer_address/{EMPTY}").write_bytes(b"")
    staged = tmp_path / "staged"
    staged.mkdir()
    _big_insert(staged / UPLOADING)
    uploading = s3.open_output_stream(landing.join(f"dms/crm/customer_master/{UPLOADING}").path)
    uploading.write(staged.joinpath(UPLOADING).read_bytes()[:PART])
    uploading.flush()  # the first part is in; the object is not, until the upload completes
    # Ended also when the test fails, while the server still runs: an upload left open hangs pyarrow at exit.
    request.addfinalizer(lambda: uploading.closed or uploading.close())
    environ = _environ(tmp_path, remote, schema)
    target = tmp_path / "target"

    first = _run(environ, target)
    assert first.returncode == 1, _said(first)
    refusal = (
        f"ERROR: refused: crm__customer_address (source crm.customer_address): raw file {remote}/landing/dms/crm/"
        f"customer_address/{EMPTY} is empty (0 bytes): an upload still in progress, or one that failed."
    )
    assert any(line.startswith(refusal) for line in _errors(first)), _said(first)
    assert "Traceback" not in first.stdout + first.stderr
    assert "crm__customer_master: applied" in first.stdout, _said(first)
    assert _metadata_files(remote, schema, "crm__customer_address") == []  # refused: not created
    assert not [f for f in landing.files() if f.name == UPLOADING]  # the upload in progress is not listed

    # The complete file replaces the empty one; a new customer_master file is deleted (a lifecycle rule)
    # once the run listed it, before its batch reads it.
    dms.write_stage(staging := tmp_path / "stage2", 2)
    shutil.copy(staging / "dms/crm/customer_address" / EMPTY, address / EMPTY)
    storage.upload(address / EMPTY, landing.join(f"dms/crm/customer_address/{EMPTY}"))
    storage.upload(staging / "dms/crm/customer_master" / GONE, landing.join(f"dms/crm/customer_master/{GONE}"))
    before = _metadata_files(remote, schema, "crm__customer_master")
    paused = {**environ, "CDC_PAUSE_AT": "before_batch:crm__customer_master", "CDC_PAUSE_SECONDS": "10"}
    command = _run_command(environ, target)
    process = subprocess.Popen(
        command, env=paused, cwd=PROJECT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    said = []
    for line in process.stdout:
        said.append(line)
        if "pause point before_batch" in line and "reached" in line:
            landing.join(f"dms/crm/customer_master/{GONE}").filesystem.delete_file(
                landing.join(f"dms/crm/customer_master/{GONE}").path
            )
            break
    out, err = process.communicate(timeout=600)
    second = subprocess.CompletedProcess(command, process.returncode, "".join(said) + out, err or "")
    assert second.returncode == 1, _said(second)
    gone = [line for line in _errors(second) if "crm__customer_master" in line]
    assert len(gone) == 1 and GONE in gone[0], _said(second)
    assert "Traceback" not in second.stdout + second.stderr and "\tat " not in second.stdout + second.stderr
    assert "crm__customer_address: applied" in second.stdout, _said(second)
    assert _metadata_files(remote, schema, "crm__customer_master") == before  # no commit: nothing written

    # The upload completes: the next run applies it (and the customer_master file still there).
    uploading.write(staged.joinpath(UPLOADING).read_bytes()[PART:])
    uploading.close()
    shutil.copy(staged / UPLOADING, master / UPLOADING)
    dumped = tmp_path / "dump.pickle"
    command = [sys.executable, "-m", "helpers.fault_run", "--landing", str(tmp_path / "nothing-new")]
    command += ["--land-to", f"{remote}/landing", "--schema", schema, "--target-path", str(target)]
    command += ["--dump", str(dumped), "--", *SELECT]
    (tmp_path / "nothing-new").mkdir()
    third = subprocess.run(command, env=environ, cwd=PROJECT, capture_output=True, text=True, timeout=600)
    assert third.returncode == 0, _said(third)
    with dumped.open("rb") as source:
        state = pickle.load(source)
    for table, folder in (("customer_master", master), ("customer_address", address)):
        wanted = [*dms.TABLES[table], "_cdc_op", "_cdc_ts"]
        expected = {k: {c: row.get(c) for c in wanted} for k, row in replay(folder, KEY).items()}
        actual = _rows(state, f"{schema}_current.crm__{table}", wanted)
        assert_same_table(actual, expected, f"after the upload completed: {table}")
    ledger = state["tables"][f"{schema}_cdc_meta.cdc_file_ledger"]
    model, name = ledger["columns"].index("model_name"), ledger["columns"].index("file_name")
    applied = sorted(row[name] for row in ledger["rows"] if row[model] == "crm__customer_master")
    assert applied == sorted(["LOAD00000001.parquet", "LOAD00000002.parquet", UPLOADING]), applied  # not GONE
    assert not state["ledger_duplicates"]
