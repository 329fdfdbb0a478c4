"""The erasure stage (`BENCH_STAGES=erasure`): `python -m python_hooks erase` of BENCH_ERASED_CUSTOMERS
customers (default 10) on the 1x `orders` table, after its batches and full refresh, timed as one
stage, then checked: the table equals the generator's replay without those customers' orders, and
no raw file holds a row of theirs.

`orders` declares the subject in its source yml (`cdc_subjects: {customer: customer_id}`,
`cdc_personal_data: {customer: [customer_email]}`); a customer has 7 orders (generate.row_images), so
an erasure removes 70 rows, from the current-state table, its raw files (the full load's and the
batches') and every older snapshot. The stock dbt-spark model (bench/stock.py) reads the same source
but declares no subject: the erasure names it (`undeclared`) and leaves it as it is."""

from __future__ import annotations

import logging
import os

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bench.context import Run
from bench.generate import KEY, LOAD_US, Checksum, TableData, expected_rows, table_checksum
from bench.harness import BenchError, environment
from python_hooks.project.storage import Location

log = logging.getLogger(__name__)

SUBJECT = "customer"


def customers(data: TableData, count: int) -> list[int]:
    """`count` customers spread over the key range (customer_id = order_id / 7 + 1000)."""
    last = data.rows // 7 + 1000
    return sorted({1000 + (last - 1000) * (i + 1) // (count + 1) for i in range(count)})


def expected_without(data: TableData, through_batch: int, erased: list[int]) -> Checksum:
    """The replay's checksum without the orders of `erased` customers."""
    rows = expected_rows(data, through_batch)
    customer = pc.add(pc.divide(rows[KEY], 7), 1000)
    kept = rows.filter(pc.invert(pc.is_in(customer, value_set=pa.array(erased, pa.int64()))))
    return Checksum(
        kept.num_rows,
        pc.sum(pc.multiply(kept[KEY], kept["quantity"])).as_py() or 0,
        pc.sum(kept["amount_cents"]).as_py() or 0,
        pc.sum(pc.subtract(kept["ts_us"], LOAD_US)).as_py() or 0,
    )


def raw_rows_of(folder: Location, erased: list[int]) -> int:
    """Rows of the `erased` customers in the raw files of `folder` (on this disk or on S3)."""
    wanted = pa.array(erased, pa.int64())
    found = 0
    for file in sorted(f for f in folder.files() if f.name.endswith(".parquet")):
        with file.location.open() as handle:
            column = pq.read_table(handle, columns=["customer_id"]).column("customer_id")
        found += pc.sum(pc.is_in(pc.cast(column, pa.int64()), value_set=wanted)).as_py() or 0
    return found


def keep_copy(folder: Location, before: Location) -> None:
    """The raw files of `folder` as they are, in `before`: hard links on this disk (free; the erasure
    writes new files and renames them over these names), server-side copies on S3."""
    files = [f for f in folder.files() if f.name.endswith(".parquet")]
    if before.is_local:
        before.local_path.mkdir(parents=True, exist_ok=True)
        for file in files:
            os.link(file.location.local_path, before.local_path / file.relative)
        return
    for file in files:
        before.filesystem.copy_file(file.location.path, before.join(file.relative).path)


def _before_erasure(run: Run) -> Location:
    """Beside the landing zone: the work folder's `landing-before-erasure`, or that prefix in the bucket."""
    if run.landing.is_local:
        return Location.parse(run.work / "landing-before-erasure")
    return Location(run.landing.prefix, f"{run.landing.bucket}/landing-before-erasure")


def measure(run: Run, data: TableData, count: int) -> dict:
    """Erase `count` customers from the 1x table; returns the stage's figures and check."""
    from python_hooks import personal_data as erase
    from python_hooks.project.warehouse import Warehouse

    erased = customers(data, count)
    relation = run.relation(data.name)
    folder = run.landing.join(f"dms/bench/{data.name}")
    # The raw files as they were, for whoever checks the earlier stages later (tests/pytest/test_bench_smoke.py).
    before = _before_erasure(run).join(f"dms/bench/{data.name}")
    keep_copy(folder, before)
    dbt = run.dbt
    with environment(**dbt._env):
        parsed = dbt._runner.invoke(["parse", *dbt._common()])
        if not parsed.success:
            raise BenchError(f"dbt parse failed before the erasure: {parsed.exception}")
        with run.stages.stage(f"1x: erasure of {len(erased)} customers", rows=len(erased)) as record:
            with Warehouse.open(dbt._common()) as warehouse:
                report = erase.erase(
                    warehouse, parsed.result, SUBJECT, [str(c) for c in erased], "bench: erasure stage"
                )
            record.extra = {
                "rows_removed": report.rows,
                "raw_files_rewritten": len(report.raw_files),
                "snapshots_expired": report.snapshots_expired,
                "files_removed": report.files_removed,
            }
    for line in erase.summary(report):
        log.info("%s", line)
    actual = table_checksum(run.sql, relation)
    expected = expected_without(data, len(data.batches), erased)
    left_in_raw = raw_rows_of(folder, erased)
    check = {
        "label": "1x after erasure",
        "relation": relation,
        "expected": expected.as_dict(),
        "actual": actual.as_dict(),
        "equal": actual == expected and left_in_raw == 0,
        "raw_rows_left": left_in_raw,
    }
    if not check["equal"]:
        log.error(
            "erasure: %s differs from the replay without the erased customers, or raw rows left: %s", relation, check
        )
    run.checks.append(check)
    return {
        "customers": len(erased),
        "customer_ids": erased,
        "raw_files_before": str(before),
        "seconds": round(report.seconds, 3),
        "rows_removed": report.rows,
        "raw_files_rewritten": len(report.raw_files),
        "snapshots_expired": report.snapshots_expired,
        "files_removed": report.files_removed,
        "undeclared": report.undeclared,
    }
