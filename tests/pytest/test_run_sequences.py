"""Sequences of runs as an operator lives them (issue 43): each refusal is right on its own run, and the
runs after it must be right too. A refused, removed or replaced file leaves no trace in a table.

- A file of another table lands in crm.customer_address's folder: refused in words, the table unchanged;
  the operator removes it and the next run is clean; a later file merely of the same name must bring
  none of the refused file's columns (python_hooks/evolution/apply.py: inspect_table holds the rule).
- A file whose pages do not decode is refused in one worded line before any statement reads it (the run
  reads each file of the batch with pyarrow first: evolution/apply.py: refused_files).
- An applied file replaced in place (a column more), damaged or emptied in place: the ledger knows it by
  name, so its new content is never applied, and neither its columns nor its footer (nor its 0 bytes) refuse
  or change the table in the runs that apply later files; one warning line names it, and the staging view
  does not take it for a file that landed after the hooks.
"""

from __future__ import annotations

import datetime as dt
import io
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fuzz.damage import damage
from fuzz.python_side import NOT_WORDS, assert_worded
from helpers.paths import PROJECT
from helpers.refusal import assert_changed_nothing, table_state
from helpers.tables import assert_same_table, table_rows
from oracles.replay_dms import replay
from python_hooks import personal_data
from python_hooks.project.warehouse import Warehouse
from sample_data import dms

# make test-all (nightly): make test runs short sequences of the same machine (test_fuzz_sequences.py)
pytestmark = pytest.mark.nightly

CRM = ("--select", "staging.crm", "current_state.crm")
SAME_NAME = "20261103-101000000.parquet"  # the name stage 3 gives a crm.customer_address CDC file
APPLIED = "20261102-091500000.parquet"  # stage 2's crm.customer_address CDC file, applied by `_built`


def _folder(landing: Path, table: str) -> Path:
    return landing / "dms" / "crm" / table


def _actual(spark, schema: str, table: str) -> dict:
    relation = f"{schema}_current.crm__{table}"
    return table_rows(spark, relation, ["customer_id"], [*dms.TABLES[table], "_cdc_op", "_cdc_ts"])


def _summary(caplog) -> str:
    records = [
        r.getMessage() for r in caplog.records if r.name == "python_hooks.commands.run" and r.levelname == "ERROR"
    ]
    start = next((i for i, r in enumerate(records) if r.startswith("this run refused or failed")), len(records))
    return "\n".join(records[start:])


def _order_file(path: Path) -> None:
    """A CDC file of another table (crm.order: key order_id, and an amount), as DMS writes it."""
    when = pa.array([dt.datetime(2026, 11, 3, 10, 10, tzinfo=dt.timezone.utc)] * 2, pa.timestamp("us", tz="UTC"))
    pq.write_table(
        pa.table(
            {
                "Op": ["I", "I"],
                "order_id": pa.array([1, 2], pa.int64()),
                "amount": pa.array([Decimal("12.50"), Decimal("0.99")], pa.decimal128(10, 2)),
                "last_update_time": when,
                "AR_H_CHANGE_SEQ": [f"{n:035d}" for n in (1, 2)],
            }
        ),
        path,
    )


def _built(dbt, spark, schema: str, tmp_path: Path) -> tuple[Path, str, object]:
    """Stages 1 and 2 of the CRM tables applied: the landing folder, customer_address's relation and its state."""
    landing = tmp_path / "landing"
    for stage in (1, 2):
        dms.write_stage(landing, stage)
    assert dbt.pipeline(*CRM, landing=landing, schema=schema)
    relation = f"{schema}_current.crm__customer_address"
    return landing, relation, table_state(spark, schema, "crm__customer_address", relation)


def test_a_refused_files_columns_never_reach_the_table(dbt, spark, schema, tmp_path, caplog):
    landing, relation, before = _built(dbt, spark, schema, tmp_path)
    columns = [name for name, _ in before.columns]

    # 1. A file of another table lands in customer_address's folder: refused in one line, table unchanged.
    stranger = _folder(landing, "customer_address") / SAME_NAME
    _order_file(stranger)
    caplog.clear()
    assert not dbt.pipeline(*CRM, landing=landing, schema=schema), "the stranger's run must fail"
    text = _summary(caplog)
    for part in (SAME_NAME, "crm__customer_address", "no key column 'customer_id'"):
        assert part in text, f"{part!r} not in the run's last lines:\n{text}"
    assert_changed_nothing(before, table_state(spark, schema, "crm__customer_address", relation), "stranger")

    # 2. The operator removes it: the next run is clean.
    stranger.unlink()
    caplog.clear()
    assert dbt.pipeline(*CRM, landing=landing, schema=schema), _summary(caplog)

    # 3. A later run's new file merely has the same name: the refused file's columns must not appear.
    dms.write_stage(landing, 3)
    assert (_folder(landing, "customer_address") / SAME_NAME).exists()
    caplog.clear()
    assert dbt.pipeline(*CRM, landing=landing, schema=schema), _summary(caplog)
    now = [name for name, _ in spark.table(relation).dtypes]
    assert now == columns, f"the table's columns changed: {sorted(set(now) - set(columns))} appeared"
    for table in dms.TABLES:
        expected = replay(_folder(landing, table), ["customer_id"])
        assert_same_table(_actual(spark, schema, table), expected, f"after the same-named file: {table}")


def _unreadable_pages(good: bytes, name: str) -> bytes:
    """`good` with bytes flipped in a data page (fuzz/damage.py), the first seed whose pages pyarrow cannot
    decode while its footer reads."""
    for seed in range(50):
        bad = damage(good, name, "flip_data_page", seed).files[name]
        pq.read_schema(io.BytesIO(bad))
        try:
            pq.read_table(io.BytesIO(bad))
        except Exception:  # noqa: BLE001 - any failure: pyarrow cannot decode it
            return bad
    raise AssertionError("no seed of flip_data_page made pages pyarrow cannot decode")


def test_a_file_whose_pages_do_not_decode_is_refused_in_one_worded_line(dbt, spark, schema, tmp_path, caplog):
    """Refused before any statement reads it (the staging view's data tests would, first): one line naming the
    file and the table, in words; no Spark internals in the run's last lines; the table unchanged."""
    landing, relation, before = _built(dbt, spark, schema, tmp_path)

    dms.write_stage(landing, 3)
    bad = _folder(landing, "customer_address") / SAME_NAME
    good = bad.read_bytes()
    bad.write_bytes(_unreadable_pages(good, SAME_NAME))
    caplog.clear()
    assert not dbt.pipeline(*CRM, landing=landing, schema=schema), "the damaged run must fail"
    summary = _summary(caplog).splitlines()
    text = "\n".join(summary)
    naming = [line for line in summary if SAME_NAME in line]
    assert len(naming) == 1, f"{len(naming)} lines name the file:\n{text}"
    assert naming[0].startswith("refused: crm__customer_address (source crm.customer_address): "), text
    assert "pages do not decode" in naming[0], text
    assert_worded(naming[0].removeprefix("refused: "), SAME_NAME, "crm__customer_address", "pages")
    assert not any(line.startswith("failed: ") for line in summary), f"a statement read the file:\n{text}"
    assert not any(NOT_WORDS.search(line) for line in summary), text
    assert summary[-1].startswith("What to do:"), text
    assert_changed_nothing(before, table_state(spark, schema, "crm__customer_address", relation), "pages")
    master = replay(_folder(landing, "customer_master"), ["customer_id"])
    assert_same_table(_actual(spark, schema, "customer_master"), master, "the other table")

    bad.write_bytes(good)  # the good copy under the same name: applied whole
    assert dbt.pipeline(*CRM, landing=landing, schema=schema), _summary(caplog)
    for table in dms.TABLES:
        expected = replay(_folder(landing, table), ["customer_id"])
        assert_same_table(_actual(spark, schema, table), expected, f"after the good copy: {table}")


def _accepted(tmp_path: Path, stages: int) -> Path:
    """The files the pipeline accepts, as written, in a folder of their own: what the replay reads."""
    accepted = tmp_path / "accepted"
    for stage in range(1, stages + 1):
        dms.write_stage(accepted, stage)
    return accepted


def _assert_replayed(spark, schema: str, accepted: Path, label: str) -> None:
    for table in dms.TABLES:
        expected = replay(_folder(accepted, table), ["customer_id"])
        assert_same_table(_actual(spark, schema, table), expected, f"{label}: {table}")


def _warnings(caplog, name: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelname == "WARNING" and name in r.getMessage()]


def _assert_one_warning(caplog, name: str) -> None:
    """One worded warning line names the applied file changed in place and its table, and says it is ignored."""
    lines = _warnings(caplog, name)
    assert len(lines) == 1, f"{len(lines)} warning lines name {name}: {lines}"
    assert "crm__customer_address" in lines[0] and "already applied" in lines[0], lines[0]
    assert "\n" not in lines[0] and not NOT_WORDS.search(lines[0]), lines[0]


def test_an_applied_file_replaced_with_a_column_more_brings_no_column(dbt, spark, schema, tmp_path, caplog):
    """The ledger keys applied files by name: a replaced applied file's new content is never applied, and its
    new column must not reach the table when a later file is applied either."""
    landing, relation, before = _built(dbt, spark, schema, tmp_path)
    columns = [name for name, _ in before.columns]

    applied = _folder(landing, "customer_address") / APPLIED
    replaced = pq.read_table(applied)
    replaced = replaced.set_column(
        replaced.schema.get_field_index("city"), "city", pa.array(["Atlantis"] * replaced.num_rows)
    ).append_column("loyalty_tier", pa.array(["gold"] * replaced.num_rows))
    pq.write_table(replaced, applied)
    dms.write_stage(landing, 3)
    caplog.clear()
    assert dbt.pipeline(*CRM, landing=landing, schema=schema), _summary(caplog)
    now = [name for name, _ in spark.table(relation).dtypes]
    assert now == columns, f"the table's columns changed: {sorted(set(now) - set(columns))} appeared"
    _assert_replayed(spark, schema, _accepted(tmp_path, 3), "after the replaced applied file")
    _assert_one_warning(caplog, APPLIED)


def _overwritten_footer(good: bytes) -> bytes:
    """`good` with its footer's bytes zeroed, its length and closing marker kept."""
    length = int.from_bytes(good[-8:-4], "little")
    return good[: -8 - length] + bytes(length) + good[-8:]


def _segment_file(folder: Path) -> Path:
    """A CDC file of crm.customer_address after stage 4, as DMS writes it once the source gained a column
    `segment`: an update of customer 1."""
    when = dt.datetime(2026, 11, 5, 9, 0, tzinfo=dt.timezone.utc)
    path = folder / "20261105-090000000.parquet"
    pq.write_table(
        pa.table(
            {
                "Op": ["U"],
                "customer_id": pa.array([1], pa.int64()),
                "city": ["Reykjavik"],
                "country": ["Iceland"],
                "row_audit_ts": pa.array([when], dms.TIMESTAMP),
                "segment": ["retail"],
                "last_update_time": pa.array([when], dms.TIMESTAMP),
                "AR_H_CHANGE_SEQ": ["9" * 35],
            }
        ),
        path,
    )
    return path


def _assert_no_file_said_landed(capfd, label: str) -> None:
    """The staging view's warning about files that landed after the hooks registered the folder's files
    (macros/cdc/landing.sql: cdc_landing_reads) is not given when none did: an applied file changed in place,
    which the hooks left out and warned about, is not one."""
    out = capfd.readouterr().out
    said = [line for line in out.splitlines() if "landed in" in line]
    assert not said, f"{label}: the run says files landed that did not:\n" + "\n".join(said)


@pytest.mark.parametrize(
    "damaged",
    [_overwritten_footer, lambda good: good[: len(good) // 2], lambda good: b""],
    ids=["footer_overwritten", "truncated", "emptied"],
)
def test_an_applied_file_damaged_in_place_refuses_no_later_run(dbt, spark, schema, tmp_path, caplog, capfd, damaged):
    """An applied file is never read by a batch again: damaged (or emptied: 0 bytes, which an upload in
    progress also has) in place, it must not refuse the table at every run; the files that land after it are
    applied, run after run, and one with a new column too (its staging view is built again then: Spark must
    not meet the damaged footer there either). One warning per run names it; the staging view says no file
    landed after the hooks."""
    landing, relation, before = _built(dbt, spark, schema, tmp_path)

    applied = _folder(landing, "customer_address") / APPLIED
    applied.write_bytes(damaged(applied.read_bytes()))
    for stage in (3, 4):
        dms.write_stage(landing, stage)
        caplog.clear()
        capfd.readouterr()
        assert dbt.pipeline(*CRM, landing=landing, schema=schema), _summary(caplog)
        _assert_replayed(spark, schema, _accepted(tmp_path, stage), f"stage {stage} after the damaged applied file")
        _assert_one_warning(caplog, APPLIED)
        _assert_no_file_said_landed(capfd, f"stage {stage}")
    assert [name for name, _ in spark.table(relation).dtypes] == [name for name, _ in before.columns]

    accepted = _accepted(tmp_path, 4)
    _segment_file(_folder(landing, "customer_address"))
    _segment_file(_folder(accepted, "customer_address"))
    caplog.clear()
    assert dbt.pipeline(*CRM, landing=landing, schema=schema), _summary(caplog)
    _assert_one_warning(caplog, APPLIED)
    _assert_no_file_said_landed(capfd, "the file with a new column")
    columns = [*dms.TABLES["customer_address"], "segment", "_cdc_op", "_cdc_ts"]
    expected = {
        key: {**row, "segment": row.get("segment")}
        for key, row in replay(_folder(accepted, "customer_address"), ["customer_id"]).items()
    }
    actual = table_rows(spark, relation, ["customer_id"], columns)
    assert_same_table(actual, expected, "after a file with a new column")


def _erase(dbt, landing: Path, schema: str, keys: list[str]):
    """`python -m python_hooks erase --subject customer --key ...`, in this process (as test_history.py)."""
    parsed = dbt("parse", landing=landing, schema=schema)
    assert parsed.success, parsed.exception
    with Warehouse.open(["--project-dir", str(PROJECT)]) as warehouse:
        return personal_data.erase(warehouse, parsed.result, "customer", keys, "pytest: an erasure between runs")


def test_a_run_after_an_erasure_takes_no_rewritten_file_for_one_changed_in_place(
    dbt, spark, schema, tmp_path, caplog, capfd
):
    """An erasure rewrites the applied raw files that hold the subject, under their names: the runs after it
    must neither warn that those files changed in place (nor tell the operator to put the applied copy back),
    nor leave them out of what the staging view reads; the tables equal the replay of the accepted files
    without the subject, and a later file of the subject brings it back nowhere."""
    landing, _, _ = _built(dbt, spark, schema, tmp_path)
    applied = _folder(landing, "customer_address") / APPLIED
    erased = str(pq.read_table(applied).column("customer_id")[0].as_py())
    report = _erase(dbt, landing, schema, [erased])
    assert APPLIED in {Path(p).name for p in report.raw_files}, report.raw_files

    for stage in (3, 4):
        dms.write_stage(landing, stage)
        caplog.clear()
        capfd.readouterr()
        assert dbt.pipeline(*CRM, landing=landing, schema=schema), _summary(caplog)
        assert _warnings(caplog, ".parquet") == [], f"stage {stage}: a warning names a raw file"
        _assert_no_file_said_landed(capfd, f"stage {stage} after the erasure")
        accepted = _accepted(tmp_path, stage)
        for table in dms.TABLES:
            expected = {
                key: row
                for key, row in replay(_folder(accepted, table), ["customer_id"]).items()
                if str(key[0]) != erased
            }
            assert_same_table(_actual(spark, schema, table), expected, f"stage {stage} after the erasure: {table}")
    view = f"{schema}_staging.stg_crm__customer_address"
    files = {row[0] for row in spark.sql(f"select distinct _cdc_source_file from {view}").collect()}
    assert APPLIED in files, f"the staging view reads no row of the rewritten {APPLIED}: {sorted(files)}"
