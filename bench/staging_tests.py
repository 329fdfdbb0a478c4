"""What a staging view's six contract tests cost as its folder grows, read whole or filtered to a few file
names (bench/TUNING.md, "Round 7"): the measurement behind macros/cdc/staging_tests.sql.

    .venv/bin/python -m bench.staging_tests [FILES ...]      # default: 16 288 1440 (a day of one-minute files)

One folder per size of small DMS-shaped Parquet files (6 rows each, as `make soak` lands them), a view like
the staging view's (`_metadata.file_name as _cdc_source_file`, a filter on the operation), and six
queries shaped like its tests, timed after one warm-up: over the whole view, then filtered to the 5 newest
file names. Spark alone (local[2]), no dbt: the test's own SQL costs the same in both.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

TESTS = 6  # the staging view's contract tests (models/staging/*/_*__models.yml)
NEWEST = 5  # the files a scheduled run applies (5 one-minute files for a run every 5 minutes)


def write_folder(folder: Path, files: int) -> list[str]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True)
    names = []
    for i in range(files):
        table = pa.table(
            {
                "Op": ["U"] * 6,
                "id": list(range(6)),
                "name": ["x"] * 6,
                "last_update_time": pa.array([i * 60_000_000] * 6, pa.timestamp("us")),
            }
        )
        name = f"2026{i:08d}.parquet"
        pq.write_table(table, folder / name)
        names.append(name)
    return names


def seconds(spark, sql: str) -> float:
    spark.sql(sql).collect()  # warm-up
    started = time.monotonic()
    for _ in range(TESTS):
        spark.sql(sql).collect()
    return time.monotonic() - started


def main(sizes: list[int]) -> None:
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.driver.memory", "2g")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    print(f"| raw files | {TESTS} tests, whole view (s) | {TESTS} tests, the {NEWEST} newest files (s) |")
    print("|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="bench-staging-tests-") as work:
        for size in sizes:
            folder = Path(work) / f"files{size}"
            names = write_folder(folder, size)
            view = f"staging{size}"
            spark.sql(
                f"create or replace temporary view {view} as select *, _metadata.file_name as _cdc_source_file"
                f" from parquet.`{folder}` where Op in ('I', 'U', 'D', 'T')"
            )
            test = "select count(*) from {} where _cdc_source_file is null or Op is null"
            newest = ", ".join(f"'{n}'" for n in names[-NEWEST:])
            whole = seconds(spark, test.format(view))
            filtered = seconds(spark, test.format(f"(select * from {view} where _cdc_source_file in ({newest}))"))
            print(f"| {size:,} | {whole:.1f} | {filtered:.1f} |", flush=True)
    spark.stop()


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [16, 288, 1440])
