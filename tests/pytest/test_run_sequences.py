"""Sequences of runs as an operator lives them (issue 43): each refusal is right on its own run, and the
runs after it must be right too. A refused, removed or replaced file leaves no trace in a table.

- A file of another table lands in crm.customer_address's folder: refused in words, the table unchanged;
  the operator removes it and the next run is clean; a later file merely of the same name must bring
  none of the refused file's columns (python_hooks/evolution/apply.py: inspect_table holds the rule).
- A file whose pages do not decode is refused in one worded line before any statement reads it (the run
  reads each file of the batch with pyarrow first: evolution/apply.py: unreadable_files).
"""

from __future__ import annotations

import datetime as dt
import io
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from fuzz.damage import damage
from fuzz.python_side import NOT_WORDS, assert_worded
from helpers.refusal import assert_changed_nothing, table_state
from helpers.tables import assert_same_table, table_rows
from oracles.replay_dms import replay
from sample_data import dms

CRM = ("--select", "staging.crm", "current_state.crm")
SAME_NAME = "20261103-101000000.parquet"  # the name stage 3 gives a crm.customer_address CDC file


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
