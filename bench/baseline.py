"""The two yardsticks the pipeline is measured against, run in the pipeline's own SparkSession.

handwritten_merge  what the seed's Glue job did, written by hand in PySpark: read the batch's
                   new files, keep the last change per key by (last_update_time,
                   AR_H_CHANGE_SEQ), then one MERGE INTO with upsert/delete. No tombstones, no
                   "is it newer than the row" guard, no ledger, no validation: the job a careful
                   engineer would write for this one table.
floor              the least any merge must do: scan the target's key column (to find the rows
                   the batch touches) and write the batch's rows once as Parquet.

Both run against the dbt-built table in the state it had before the measured batch: the
handwritten MERGE sets the table back to that snapshot, merges, and the caller restores the
pipeline's snapshot afterwards, so both jobs see the same files, delete files and properties.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Sequence
from pathlib import Path

SOURCE_VIEW = "bench_handwritten_batch"


def current_snapshot(spark, relation: str) -> int | None:
    rows = spark.sql(f"select snapshot_id from {relation}.refs where name = 'main'").collect()
    return int(rows[0][0]) if rows else None


def set_current_snapshot(spark, relation: str, snapshot_id: int) -> None:
    spark.sql(f"call spark_catalog.system.set_current_snapshot(table => '{relation}', snapshot_id => {snapshot_id})")


def handwritten_merge(spark, relation: str, files: Sequence[Path], key: str) -> float:
    """Seconds for the whole job (read, dedup, MERGE)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    start = time.perf_counter()
    target_columns = spark.table(relation).columns
    business = [c for c in target_columns if not c.startswith("_cdc_")]
    raw = spark.read.parquet(*[str(f) for f in files])
    events = raw.select(
        *[F.col(c) for c in business],
        F.col("Op").alias("_cdc_op"),
        F.col("last_update_time").alias("_cdc_ts"),
        F.col("AR_H_CHANGE_SEQ").alias("_cdc_seq"),
        F.col("_metadata.file_name").alias("_cdc_source_file"),
    )
    last_change = Window.partitionBy(key).orderBy(F.col("_cdc_ts").desc(), F.col("_cdc_seq").desc())
    latest = (
        events.withColumn("_rank", F.row_number().over(last_change))
        .where(F.col("_rank") == 1)
        .select(
            *business,
            "_cdc_op",
            "_cdc_ts",
            "_cdc_seq",
            "_cdc_source_file",
            F.xxhash64(*business).alias("_cdc_row_hash"),
            F.current_timestamp().alias("_cdc_applied_at"),
        )
        .select(*target_columns)
    )
    latest.createOrReplaceTempView(SOURCE_VIEW)
    spark.sql(f"""
        merge into {relation} as t
        using {SOURCE_VIEW} as s
        on t.`{key}` = s.`{key}`
        when matched and s._cdc_op = 'D' then delete
        when matched then update set *
        when not matched and s._cdc_op <> 'D' then insert *
    """)
    seconds = time.perf_counter() - start
    spark.catalog.dropTempView(SOURCE_VIEW)
    return seconds


def floor(spark, relation: str, snapshot_id: int, key: str, files: Sequence[Path], out: Path) -> tuple[float, float]:
    """(seconds to scan the key column of the target at `snapshot_id`, seconds to write the
    batch's rows as Parquet)."""
    start = time.perf_counter()
    spark.sql(f"select `{key}` from {relation} version as of {snapshot_id}").write.format("noop").mode(
        "overwrite"
    ).save()
    scan = time.perf_counter() - start
    start = time.perf_counter()
    spark.read.parquet(*[str(f) for f in files]).write.mode("overwrite").parquet(str(out))
    write = time.perf_counter() - start
    shutil.rmtree(out, ignore_errors=True)
    return scan, write


def scan_key_column(spark, relation: str, key: str) -> dict:
    """Seconds to scan the key column of the table as it is now (after compaction: no deletes to apply)."""
    start = time.perf_counter()
    spark.table(relation).select(key).write.format("noop").mode("overwrite").save()
    return {"scan_key_column_after_seconds": round(time.perf_counter() - start, 3)}
