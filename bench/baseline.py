"""The two yardsticks the pipeline is measured against, run as SQL on the pipeline's own target.

handwritten_merge  what the seed's Glue job did, written by hand: read the batch's new files, keep
                   the last change per key by (last_update_time, AR_H_CHANGE_SEQ) in a temporary
                   view, then one MERGE INTO with upsert/delete. No tombstones, no "is it newer than
                   the row" guard, no ledger, no validation: the job a careful engineer would write
                   for this one table.
floor              the least any merge must do: scan the target's key column (to find the rows
                   the batch touches) and write the batch's rows once as Parquet.

Both are plain SQL through the bench's SQL runner (bench/sql.py), so they are the same job on every
target: in the process's SparkSession on `local`, in a session of the Thrift Server on `cluster`.

Both run against the dbt-built table in the state it had before the measured batch: the
handwritten MERGE sets the table back to that snapshot, merges, and the caller restores the
pipeline's snapshot afterwards, so both jobs see the same files, delete files and properties.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from bench.sql import Sql, columns, quote_path, string_literal
from python_hooks.project.storage import Location, delete_tree

SOURCE_VIEW = "bench_handwritten_batch"


def current_snapshot(sql: Sql, relation: str) -> int | None:
    rows = sql.query(f"select snapshot_id from {relation}.refs where name = 'main'")
    return int(rows[0][0]) if rows else None


def set_current_snapshot(sql: Sql, relation: str, snapshot_id: int) -> None:
    sql.execute(f"call spark_catalog.system.set_current_snapshot(table => '{relation}', snapshot_id => {snapshot_id})")


def batch_files(files: Sequence[Location]) -> str:
    """The batch's raw files as one path Spark reads: a glob naming each file (`folder/{a,b}`), on
    this disk or on S3 (`s3a://bucket/folder/{a,b}`)."""
    folders = {str(f).rsplit("/", 1)[0] for f in files}
    if len(folders) != 1:
        raise ValueError(f"the batch's files must be in one folder, got {sorted(folders)}")
    names = [str(f).rsplit("/", 1)[1] for f in files]
    return f"{folders.pop()}/{names[0]}" if len(names) == 1 else f"{folders.pop()}/{{{','.join(names)}}}"


def _q(column: str) -> str:
    return "`" + column.replace("`", "``") + "`"


def handwritten_batch_sql(target_columns: Sequence[str], files: Sequence[Location], key: str) -> str:
    """The temporary view: the last change per key of the batch's files, in the target's columns."""
    business = [c for c in target_columns if not c.startswith("_cdc_")]
    values = {
        **{c: _q(c) for c in business},
        "_cdc_op": "_cdc_op",
        "_cdc_ts": "_cdc_ts",
        "_cdc_seq": "_cdc_seq",
        "_cdc_source_file": "_cdc_source_file",
        "_cdc_row_hash": f"xxhash64({', '.join(_q(c) for c in business)})",
        "_cdc_applied_at": "current_timestamp()",
    }
    missing = [c for c in target_columns if c not in values]
    if missing:
        raise ValueError(f"the hand-written job does not know the target's columns {missing}")
    business_list = ",\n        ".join(_q(c) for c in business)
    final = ",\n    ".join(f"{values[c]} as {_q(c)}" for c in target_columns)
    return f"""
create or replace temporary view {SOURCE_VIEW} as
with

events as (

    select
        {business_list},
        Op as _cdc_op,
        last_update_time as _cdc_ts,
        AR_H_CHANGE_SEQ as _cdc_seq,
        _metadata.file_name as _cdc_source_file

    from parquet.{quote_path(batch_files(files))}

),

latest as (

    select
        events.*,
        row_number() over (
            partition by events.{_q(key)}
            order by events._cdc_ts desc, events._cdc_seq desc
        ) as change_rank

    from events

)

select
    {final}

from latest
where change_rank = 1
"""


def handwritten_merge(sql: Sql, relation: str, files: Sequence[Location], key: str) -> float:
    """Seconds for the whole job (read, dedup, MERGE)."""
    start = time.perf_counter()
    sql.execute(handwritten_batch_sql(columns(sql, relation), files, key))
    sql.execute(f"""
        merge into {relation} as t
        using {SOURCE_VIEW} as s
        on t.{_q(key)} = s.{_q(key)}
        when matched and s._cdc_op = 'D' then delete
        when matched then update set *
        when not matched and s._cdc_op <> 'D' then insert *
    """)
    seconds = time.perf_counter() - start
    sql.execute(f"drop view if exists {SOURCE_VIEW}")
    return seconds


def floor(
    sql: Sql, relation: str, snapshot_id: int, key: str, files: Sequence[Location], out: Location
) -> tuple[float, float]:
    """(seconds to scan the key column of the target at `snapshot_id`, seconds to write the
    batch's rows as Parquet into `out`, a folder on the landing zone's storage, deleted after)."""
    start = time.perf_counter()
    sql.consume(f"select {_q(key)} from {relation} version as of {snapshot_id}")
    scan = time.perf_counter() - start
    start = time.perf_counter()
    sql.execute(
        f"insert overwrite directory {string_literal(str(out))} using parquet "
        f"select * from parquet.{quote_path(batch_files(files))}"
    )
    write = time.perf_counter() - start
    delete_tree(out)
    return scan, write


def scan_key_column(sql: Sql, relation: str, key: str) -> dict:
    """Seconds to scan the key column of the table as it is now (after compaction: no deletes to apply)."""
    start = time.perf_counter()
    sql.consume(f"select {_q(key)} from {relation}")
    return {"scan_key_column_after_seconds": round(time.perf_counter() - start, 3)}
