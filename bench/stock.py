"""R4: the pipeline's batch against stock dbt-spark on the same batch and table state.

The stock peer is bench/dbt/models/stock/bench__orders_stock.sql: the model an analyst writes
without this project (`incremental_strategy='merge'`, `unique_key`, the raw DMS folder read
directly, changes newer than the table's newest `last_update_time` kept, the last change per key).
Its table is created here from the pipeline's table at the snapshot before the measured batch
(the same rows; Op, last_update_time and AR_H_CHANGE_SEQ from the pipeline's _cdc_op, _cdc_ts and
_cdc_seq) with the pipeline table's Iceberg properties (merge-on-read, format 2), so that R4
compares the work of a batch, not two write modes. Then `dbt run --select bench__orders_stock` is
timed as the pipeline's batch is.

Stock dbt-spark gets rows wrong, and the bench says which, against the generator's replay row by
row (`wrong_rows`); reported, never a failure of the bench:
  deleted_keys_present    the replay has no row (its last change is a delete): the stock MERGE
                          cannot delete, it keeps the row with Op = 'D';
  late_overwrote_newer    the row holds a change of the batch older than the row it replaced;
  others, by kind:
    batch_change_skipped  the key's newest change is in the batch but the row does not have it:
                          a late change, committed before the table's max(last_update_time),
                          which the stock filter skips;
    missing_key           the replay has the key, the table not;
    other                 any other difference (values, commit time).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pyarrow.parquet as pq

from bench.context import Run
from bench.generate import KEY, TableData, expected_rows
from bench.harness import table_layout
from bench.instrument import breakdown
from bench.sql import Sql, columns, quote_path

log = logging.getLogger(__name__)

MODEL = "bench__orders_stock"
COPIED_PROPERTIES = ("format-version", "write.", "read.", "commit.")


def stock_relation(schema: str) -> str:
    """Beside the pipeline's tables (the model's `schema='current'`)."""
    return f"{schema}_current.{MODEL}"


def _q(column: str) -> str:
    return "`" + column.replace("`", "``") + "`"


def create_stock_table(sql: Sql, relation: str, source: str, snapshot_id: int) -> dict:
    """The stock model's table, holding `source`'s rows at `snapshot_id`, with its Iceberg properties."""
    properties = {
        key: value for key, value in sql.query(f"show tblproperties {source}") if key.startswith(COPIED_PROPERTIES)
    }
    business = [c for c in columns(sql, source) if not c.startswith("_cdc_")]
    listed = ", ".join(f"'{k}' = '{v}'" for k, v in sorted(properties.items()))
    sql.execute(f"drop table if exists {relation}")
    sql.execute(
        f"create table {relation} using iceberg tblproperties ({listed}) as select "
        + ", ".join(_q(c) for c in business)
        + f", _cdc_op as Op, _cdc_ts as last_update_time, _cdc_seq as AR_H_CHANGE_SEQ "
        f"from {source} version as of {snapshot_id}"
    )
    return properties


def classify_sql(relation: str, expected_path: Path, batch: int) -> str:
    """Rows per kind (see the module's docstring), the table against the replay's rows. A change's
    batch is in its AR_H_CHANGE_SEQ (bench/generate.py: 17 digits of commit time, then 6 of batch)."""
    in_batch = f"'{batch:06d}'"
    return f"""
with

expected as (

    select * from parquet.{quote_path(expected_path)}

),

actual as (

    select
        {_q(KEY)},
        Op as op,
        unix_micros(last_update_time) as ts_us,
        AR_H_CHANGE_SEQ as seq,
        cast(quantity as bigint) as quantity,
        cast(amount * 100 as bigint) as amount_cents

    from {relation}

),

compared as (

    select
        case
            when expected.{_q(KEY)} is null and actual.op = 'D' then 'deleted_keys_present'
            when expected.{_q(KEY)} is null then 'deleted_keys_present_op_not_d'
            when actual.{_q(KEY)} is null then 'missing_key'
            when actual.ts_us = expected.ts_us
                and actual.quantity <=> expected.quantity
                and actual.amount_cents <=> expected.amount_cents
                then 'correct'
            when actual.ts_us < expected.ts_us
                and substr(actual.seq, 18, 6) = {in_batch}
                and not substr(coalesce(expected.seq, ''), 18, 6) <=> {in_batch}
                then 'late_overwrote_newer'
            when actual.ts_us < expected.ts_us
                and substr(expected.seq, 18, 6) = {in_batch}
                and not substr(coalesce(actual.seq, ''), 18, 6) <=> {in_batch}
                then 'batch_change_skipped'
            else 'other'
        end as kind

    from actual
    full outer join expected
        on actual.{_q(KEY)} = expected.{_q(KEY)}

)

select
    kind,
    count(*) as row_count

from compared
group by kind
"""


def wrong_rows(sql: Sql, relation: str, data: TableData, through_batch: int, work: Path) -> dict:
    """The stock table against the replay after batch `through_batch`, counted by kind."""
    expected_path = work / "stock_replay" / "expected.parquet"
    expected_path.parent.mkdir(parents=True, exist_ok=True)
    expected = expected_rows(data, through_batch)
    pq.write_table(expected, expected_path)
    kinds = {kind: int(count) for kind, count in sql.query(classify_sql(relation, expected_path, through_batch))}
    deleted = kinds.pop("deleted_keys_present", 0) + kinds.pop("deleted_keys_present_op_not_d", 0)
    correct = kinds.pop("correct", 0)
    late = kinds.pop("late_overwrote_newer", 0)
    others = {kind: kinds.get(kind, 0) for kind in ("batch_change_skipped", "missing_key", "other")}
    total = deleted + late + sum(others.values())
    return {
        "relation": relation,
        "replay_rows": expected.num_rows,
        "correct_rows": correct,
        "wrong_rows": total,
        "by_kind": {"deleted_keys_present": deleted, "late_overwrote_newer": late, "others": sum(others.values())},
        "others_by_kind": others,
    }


def measure(run: Run, data: TableData, before: int, label: str) -> dict:
    """Stage `<label>: stock dbt-spark merge`: the stock model on the measured batch, from the
    pipeline table's state before it; then its rows against the replay."""
    source = run.relation(data.name)
    relation = stock_relation(run.schema)
    start = time.perf_counter()
    properties = create_stock_table(run.sql, relation, source, before)
    prepare = time.perf_counter() - start
    measured = data.batches[-1]
    with run.stages.stage(f"{label}: stock dbt-spark merge", rows=measured.events.num_rows) as record:
        statements = run.dbt("run", "--select", MODEL)
    run.breakdowns[record.name] = breakdown(statements, record.seconds)
    run.layouts[f"{label} stock model after its batch"] = table_layout(run.sql, relation)
    result = wrong_rows(run.sql, relation, data, len(data.batches), run.work)
    result.update({"model": MODEL, "tblproperties": properties, "table_copy_seconds": round(prepare, 3)})
    if result["wrong_rows"]:
        log.info("%s: %d rows differ from the replay (%s)", MODEL, result["wrong_rows"], result["by_kind"])
    return result
