"""Hostile input, one kind per test: real DMS Parquet files broken the ways real landing zones break.

Each test applies the sample's stages 1-2 to the CRM tables (`make run`: python_hooks.pipeline), then
lands stage 3 with one of its crm.customer_address files replaced by a bad version, and runs again:
- a bad file is refused: the run fails, and its last lines (after dbt's summary) name the file, the
  table and, where there is one, the column and the offending value; customer_master, beside it,
  takes stage 3 whole; customer_address is exactly as before: its rows, columns and snapshots, its ledger
  and its batch log but for one 'refused' row (helpers/refusal.py);
- the file is then fixed (its good version written under the same name) and the next run applies it:
  every table equals the replay of every raw file.
A file that is odd but not wrong (no rows, a name that does not sort as a timestamp, names with
spaces, quotes and non-ASCII characters) is applied like any other.

What a refused file means for the operator is in docs/operations.md ("Refused files").
`make test` runs the kinds marked smoke; `make faults` all of them.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from helpers.refusal import assert_changed_nothing, table_state
from helpers.runs import batch_log
from helpers.tables import assert_same_table, table_rows
from oracles.replay_dms import replay
from sample_data import dms

CRM = ("--select", "staging.crm", "current_state.crm")
BAD_NAME = "20261103-101000000.parquet"  # a stage-3 CDC file of crm.customer_address (inserts, updates, deletes)


def _folder(landing: Path, table: str) -> Path:
    return landing / "dms" / "crm" / table


def _actual(spark, schema: str, table: str) -> dict:
    relation = f"{schema}_current.crm__{table}"
    return table_rows(spark, relation, ["customer_id"], [*dms.TABLES[table], "_cdc_op", "_cdc_ts"])


def _expected(landing: Path, table: str) -> dict:
    return replay(_folder(landing, table), ["customer_id"])


def _ledger(spark, schema: str) -> list:
    return sorted(spark.table(f"{schema}_cdc_meta.cdc_file_ledger").select("model_name", "file_name").collect())


def _with_column(table: pa.Table, name: str, values: list) -> pa.Table:
    index = table.schema.get_field_index(name)
    return table.set_column(index, table.schema.field(name), pa.array(values, table.schema.field(name).type))


def _write(table: pa.Table) -> Callable[[Path], None]:
    return lambda path: pq.write_table(table, path)


def _bytes(cut: Callable[[bytes], bytes]) -> Callable[[pa.Table], Callable[[Path], None]]:
    def make(good: pa.Table) -> Callable[[Path], None]:
        def write(path: Path) -> None:
            pq.write_table(good, path)
            path.write_bytes(cut(path.read_bytes()))

        return write

    return make


# kind -> (how to break the good table into a bad file, what the refusal must say besides file and table)
REFUSED: dict[str, tuple[Callable, tuple[str, ...]]] = {
    "not_parquet": (_bytes(lambda data: b"customer_id,city\n1,Lyon\n"), ("Parquet footer",)),
    "truncated": (_bytes(lambda data: data[: len(data) // 2]), ("Parquet footer",)),
    "zero_bytes": (_bytes(lambda data: b""), ("empty (0 bytes)",)),
    "unknown_op": (
        lambda good: _write(_with_column(good, "Op", ["X", *good.column("Op").to_pylist()[1:]])),
        ("unknown operation 'X'", "Op"),
    ),
    "null_key": (
        lambda good: _write(_with_column(good, "customer_id", [None] * good.num_rows)),
        ("null or missing key column customer_id",),
    ),
    "null_commit_timestamp": (
        lambda good: _write(_with_column(good, "last_update_time", [None, *good.column("last_update_time")[1:]])),
        ("null commit timestamp", "last_update_time"),
    ),
    "key_column_missing": (
        lambda good: _write(good.drop_columns(["customer_id"])),
        ("no key column 'customer_id'",),
    ),
    "string_becomes_int": (
        lambda good: _write(
            good.set_column(
                good.schema.get_field_index("city"), "city", pa.array(list(range(good.num_rows)), pa.int64())
            )
        ),
        ("'city'", "string", "bigint"),
    ),  # fmt: skip
    "columns_differ_only_in_case": (
        lambda good: _write(good.append_column("COUNTRY", pa.array(["Atlantis"] * good.num_rows, pa.string()))),
        ("'country'", "'COUNTRY'", "differ only in case"),
    ),
}
SMOKE = {"unknown_op", "columns_differ_only_in_case", "truncated"}


def _land_stages(dbt, spark, schema: str, landing: Path) -> None:
    for stage in (1, 2):
        dms.write_stage(landing, stage)
    assert dbt.pipeline(*CRM, landing=landing, schema=schema)


@pytest.mark.parametrize(
    "kind", [pytest.param(k, marks=() if k in SMOKE else pytest.mark.faults_full) for k in REFUSED]
)
def test_bad_file_is_refused_then_applied_once_fixed(dbt, spark, schema, tmp_path, caplog, kind):
    landing = tmp_path / "landing"
    _land_stages(dbt, spark, schema, landing)
    relation = f"{schema}_current.crm__customer_address"
    before = _actual(spark, schema, "customer_address")
    state_before = table_state(spark, schema, "crm__customer_address", relation)

    dms.write_stage(landing, 3)
    bad = _folder(landing, "customer_address") / BAD_NAME
    good = pq.read_table(bad)
    break_file, says = REFUSED[kind]
    break_file(good)(bad)
    caplog.clear()
    assert not dbt.pipeline(*CRM, landing=landing, schema=schema), f"{kind}: the run must fail"

    records = [
        r.getMessage() for r in caplog.records if r.name == "python_hooks.commands.run" and r.levelname == "ERROR"
    ]
    summary = records[records.index(next(r for r in records if r.startswith("this run refused or failed"))) :]
    text = "\n".join(summary)
    for part in (BAD_NAME, "crm__customer_address", *says):
        assert part in text, f"{kind}: {part!r} not in the run's last lines:\n{text}"
    assert summary[-1].startswith("What to do:"), summary
    assert "Traceback" not in text and "at org.apache" not in text, "no stack trace"
    assert_same_table(
        _actual(spark, schema, "customer_master"), _expected(landing, "customer_master"), f"{kind}: the other table"
    )
    assert _actual(spark, schema, "customer_address") == before, f"{kind}: the refused table changed"
    # rows, columns, snapshots, ledger, batch log (helpers/refusal.py)
    assert_changed_nothing(state_before, table_state(spark, schema, "crm__customer_address", relation), kind)
    # The batch log: a 'refused' row for the table, naming the file, counting nothing as applied
    refused = batch_log(spark, schema)["crm__customer_address"][-1]
    assert refused["status"] == "refused" and refused["files_refused"] >= 1 and BAD_NAME in refused["refusal"], refused
    assert (refused["rows_inserted"], refused["rows_updated"], refused["rows_deleted"]) == (0, 0, 0), refused
    assert [s.state for s in dbt.status(landing, schema) if s.model == "crm__customer_address"] == ["refused"]

    pq.write_table(good, bad)  # fixed: the good version under the same name
    assert dbt.pipeline(*CRM, landing=landing, schema=schema), f"{kind}: the run after the fix"
    for table in dms.TABLES:
        assert_same_table(_actual(spark, schema, table), _expected(landing, table), f"{kind}: {table} after the fix")
    assert batch_log(spark, schema)["crm__customer_address"][-1]["status"] == "applied"


@pytest.mark.faults_full
def test_file_with_a_schema_and_no_rows_is_applied_as_nothing(dbt, spark, schema, tmp_path):
    landing = tmp_path / "landing"
    _land_stages(dbt, spark, schema, landing)
    dms.write_stage(landing, 3)
    empty = _folder(landing, "customer_address") / "20261103-150000000.parquet"
    pq.write_table(pq.read_table(_folder(landing, "customer_address") / BAD_NAME).slice(0, 0), empty)
    assert dbt.pipeline(*CRM, landing=landing, schema=schema)
    for table in dms.TABLES:
        assert_same_table(_actual(spark, schema, table), _expected(landing, table), f"empty file: {table}")
    assert ("crm__customer_address", empty.name) in _ledger(spark, schema), "applied: not read again"


@pytest.mark.parametrize("first_build", [True, False])
def test_two_files_of_one_name_are_refused_in_words(dbt, spark, schema, tmp_path, caplog, first_build):
    """A file is known by its name (the ledger, _cdc_source_file): two files of one name in two subfolders refuse
    the table's batch, first build or not, in one line naming the name; the other table builds. Once one copy is
    gone, the next run applies the folder."""
    landing = tmp_path / "landing"
    if not first_build:
        _land_stages(dbt, spark, schema, landing)
    written = dms.write_stage(landing, 3 if not first_build else 1)
    folder = _folder(landing, "customer_address")
    original = sorted(p for p in written if p.parent == folder)[-1]  # a file this run applies
    copy = folder / "2026" / "11" / original.name
    copy.parent.mkdir(parents=True)
    shutil.copy(original, copy)
    caplog.clear()
    assert not dbt.pipeline(*CRM, landing=landing, schema=schema), "two files of one name: the run must fail"
    text = "\n".join(r.getMessage() for r in caplog.records if r.levelname == "ERROR")
    assert f"holds 2 raw files named {original.name}" in text and "crm__customer_address" in text, text
    assert "Traceback" not in text and "at org.apache" not in text, "no stack trace"
    assert_same_table(
        _actual(spark, schema, "customer_master"), _expected(landing, "customer_master"), "the other table"
    )
    shutil.rmtree(folder / "2026")
    assert dbt.pipeline(*CRM, landing=landing, schema=schema)
    for table in dms.TABLES:
        assert_same_table(_actual(spark, schema, table), _expected(landing, table), f"after the copy went: {table}")


def test_a_first_build_leaves_a_file_of_no_rows_to_the_next_batch(dbt, spark, schema, tmp_path):
    """A full build reads the staging view filtered by the names the folder's listing pinned, and records the
    pinned files the view read rows of (macros/cdc/merge.sql: cdc_keep_files_read); a file of no rows waits,
    and the next batch reads it by its path and records it, changing no row."""
    landing = tmp_path / "landing"
    dms.write_stage(landing, 1)
    folder = _folder(landing, "customer_address")
    empty = folder / "20261101-000000000.parquet"
    pq.write_table(pq.read_table(sorted(folder.glob("*.parquet"))[0]).slice(0, 0), empty)
    assert dbt.pipeline(*CRM, landing=landing, schema=schema)
    for table in dms.TABLES:
        assert_same_table(_actual(spark, schema, table), _expected(landing, table), f"first build: {table}")
    applied = {name for model, name in _ledger(spark, schema) if model == "crm__customer_address"}
    assert applied == {p.name for p in folder.glob("*.parquet")} - {empty.name}, applied
    assert dbt.pipeline(*CRM, landing=landing, schema=schema)
    applied = {name for model, name in _ledger(spark, schema) if model == "crm__customer_address"}
    assert applied == {p.name for p in folder.glob("*.parquet")}, applied
    for table in dms.TABLES:
        assert_same_table(_actual(spark, schema, table), _expected(landing, table), f"next batch: {table}")


@pytest.mark.faults_full
def test_cdc_file_whose_name_is_not_a_timestamp_is_ordered_by_its_rows(dbt, spark, schema, tmp_path):
    """Order comes from the rows (commit time, change sequence), never from file names: stage 3's
    changes in files named `zz-…` and `changes final` apply exactly as under DMS's names."""
    landing = tmp_path / "landing"
    _land_stages(dbt, spark, schema, landing)
    for i, path in enumerate(sorted(dms.write_stage(landing, 3))):
        path.rename(path.with_name(("zz-last-but-oldest" if i % 2 else "changes final") + f"-{i}.parquet"))
    assert dbt.pipeline(*CRM, landing=landing, schema=schema)
    for table in dms.TABLES:
        assert_same_table(_actual(spark, schema, table), _expected(landing, table), f"odd names: {table}")


def test_names_with_spaces_quotes_and_non_ascii(dbt, spark, schema, tmp_path):
    """A landing root and raw file names with spaces, both quotes, a backtick and non-ASCII
    characters: read, applied, recorded in the ledger and compared like any other."""
    landing = tmp_path / "land ing 'ü\" `x` — données"
    for stage in range(1, dms.STAGES + 1):
        for path in dms.write_stage(landing, stage):
            path.rename(path.with_name(f'{path.stem} l\'été "ß" `q` #1{path.suffix}'))
        assert dbt.pipeline(*CRM, landing=landing, schema=schema), f"stage {stage}"
        for table in dms.TABLES:
            assert_same_table(
                _actual(spark, schema, table), _expected(landing, table), f"hostile names, stage {stage}: {table}"
            )
    names = {r[1] for r in _ledger(spark, schema)}
    assert any('l\'été "ß" `q` #1' in name for name in names), names
    # the ledger knows each file by the name its folder lists (Spark's _metadata.file_name is URL-encoded)
    listed = {path.name for path in landing.rglob("*.parquet")}
    assert names <= listed, sorted(names - listed)[:3]
    shutil.rmtree(landing)
