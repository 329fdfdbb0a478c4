"""The batch's validation, counted on both sides on the same hostile files: Spark's (staging, then
macros/cdc/validation.sql: cdc_validation_checks, as a batch counts them) and the hooks' (python_hooks/landing/
validation.py, before anything changes). For each producer (DMS, flattened Debezium, the Debezium envelope), files
of the sample whose operations, keys, commit timestamps and sequences were set at random to values a batch refuses or
takes; per file and check, both sides must count the same events."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from python_hooks.evolution.footers import read_pages
from python_hooks.landing.validation import FileChecks
from python_hooks.project.tables import CdcTable
from sample_data import debezium, dms

DMS_OPERATIONS = ["I", "U", "D", "u", " D ", "X", "", "T", None]
DEBEZIUM_OPERATIONS = ["r", "c", "u", "d", "t", "C", "U", "I", "x", "", None]
# DMS change sequences: digits, padded, too long, and text staging cannot make 35 digits of
DMS_SEQUENCES = [None, "", " ", "00000000000000000000000000000000042", " 42 ", "4 2", "-1", "x1", "1" * 40,
                 "1" * 35 + "x", "x" + "1" * 35]  # fmt: skip
# Debezium LSNs: a negative one is not digits
LSNS = [None, 42, 42, 42, -3]
# DMS commit times written as text: some Spark reads as timestamps, some it surely reads as none
TIME_TEXTS = ["2026-11-01 08:00:00", "2026-11-01T08:00:00.5Z", " 2026-11-01 08:00:00 ", "2026-11-01", "2026-11",
              "garbage", "", "2026-02-30 00:00:00", "2026-13-01 00:00:00", None]  # fmt: skip

# producer -> (source, staging model, key, the folder under the landing root, the sample's writer)
SOURCES = {
    "dms": (("crm", "customer_address"), "stg_crm__customer_address", "customer_id", Path("dms/crm/customer_address")),
    "debezium_flattened": (
        ("salesdb", "customer"),
        "stg_salesdb__customer",
        "id",
        debezium.LANDING_FOLDER / debezium.CUSTOMER,
    ),
    "debezium_envelope": (
        ("inventory", "product"),
        "stg_inventory__product",
        "product_id",
        debezium.LANDING_FOLDER / debezium.PRODUCT,
    ),
}


def _nulled(chooser: random.Random, column: pa.ChunkedArray, share: float) -> pa.Array:
    """The column with about `share` of its values null."""
    return pa.array([None if chooser.random() < share else v for v in column.to_pylist()], column.type)


def _hostile(producer: str, good: pa.Table, chooser: random.Random, text_times: bool = False) -> pa.Table:
    """The good file with operations, keys, commit timestamps and change sequences changed at random, as a
    producer could write them (nothing that does not decode: that is the footer's and the pages' refusal)."""
    columns = dict(zip(good.column_names, good.columns, strict=True))
    operations = DMS_OPERATIONS if producer == "dms" else DEBEZIUM_OPERATIONS
    operation = {"dms": "Op", "debezium_flattened": "__op", "debezium_envelope": "op"}[producer]
    columns[operation] = pa.array([chooser.choice(operations) for _ in range(good.num_rows)], pa.string())
    if producer == "dms":
        columns["AR_H_CHANGE_SEQ"] = pa.array([chooser.choice(DMS_SEQUENCES) for _ in range(good.num_rows)])
    elif producer == "debezium_flattened":
        columns["__source_lsn"] = pa.array([chooser.choice(LSNS) for _ in range(good.num_rows)], pa.int64())
    if producer == "dms" and text_times:
        columns["last_update_time"] = pa.array([chooser.choice(TIME_TEXTS) for _ in range(good.num_rows)], pa.string())
        columns["customer_id"] = _nulled(chooser, columns["customer_id"], 0.2)
    elif producer == "dms":
        columns["last_update_time"] = _nulled(chooser, columns["last_update_time"], 0.2)
        columns["customer_id"] = _nulled(chooser, columns["customer_id"], 0.2)
    elif producer == "debezium_flattened":
        columns["__source_ts_ms"] = _nulled(chooser, columns["__source_ts_ms"], 0.2)
        columns["id"] = _nulled(chooser, columns["id"], 0.2)
    else:
        for image in ("before", "after"):
            rows = [None if chooser.random() < 0.3 else r for r in columns[image].to_pylist()]
            rows = [dict(r, product_id=None) if r is not None and chooser.random() < 0.2 else r for r in rows]
            columns[image] = pa.array(rows, columns[image].type)
        sources = [dict(s, ts_ms=None) if chooser.random() < 0.3 else s for s in columns["source"].to_pylist()]
        sources = [dict(s, lsn=chooser.choice(LSNS)) if s is not None else s for s in sources]
        columns["source"] = pa.array(sources, columns["source"].type)
        columns["ts_ms"] = _nulled(chooser, columns["ts_ms"], 0.5)
    names = list(columns)  # the good file's, then an `Op` a full-load file lacks
    return pa.table([columns[n] for n in names], schema=pa.schema([pa.field(n, columns[n].type) for n in names]))


def _spark_counts(dbt, landing: Path, schema: str, producer: str, files: list[str]) -> dict[str, list[int]]:
    """Per file, the events failing each of cdc_validation_checks, as a batch of `files` counts them."""
    (source_name, table_name), staging_model, key, _ = SOURCES[producer]
    reader = "cdc_dms_changes" if producer == "dms" else "cdc_debezium_changes"
    query = (  # dbt parses the query first (`execute` false), with no graph to find the source in
        "{% if execute %}"
        f"{{% set node = cdc_source_node('{source_name}', '{table_name}') %}}"
        f"{{% set checks = cdc_validation_checks(['{key}']) %}}"
        "select _cdc_source_file"
        "{% for check in checks %}, {{ check[0] }} as check_{{ loop.index }}{% endfor %}"
        f" from ({{{{ {reader}(node, '{staging_model}', files={files!r}) }}}}) as staged group by _cdc_source_file"
        "{% else %}select 1{% endif %}"
    )
    result = dbt("show", "--inline", query, "--limit", "1000", landing=landing, schema=schema)
    assert result.success, result.exception
    (shown,) = result.result.results
    return {row[0]: [int(v) for v in row[1:]] for row in shown.agate_table.rows}


def _python_counts(producer: str, key: str, path: Path) -> list[int]:
    table = CdcTable("m", "s", "m", "stg_m", "src", None, producer, "last_update_time", keys=(key,))
    checks = FileChecks(table, path.name)
    read_pages(path, checks.add)
    return [checks.null_keys.get(key, 0), checks.null_timestamps, checks.bad_sequences, checks.unknown]


@pytest.mark.parametrize(("producer", "text_times"), [(producer, False) for producer in SOURCES] + [("dms", True)])
def test_both_sides_count_the_same_refused_events(dbt, spark, schema, tmp_path, producer, text_times):
    landing = tmp_path / "landing"
    dms.write_stage(landing, 1)
    debezium.write_stage(landing, 1)
    _, _, key, folder = SOURCES[producer]
    folder = landing / folder
    goods = sorted(p for p in folder.rglob("*.parquet"))
    chooser = random.Random(producer)
    written = []
    for n in range(6):
        good = goods[n % len(goods)]
        hostile = _hostile(producer, pq.read_table(good), chooser, text_times)
        if producer == "dms":
            path = folder / f"20261203-1200{n:02d}000.parquet"
        else:
            path = good.parent / f"{folder.name}+{good.parent.name.split('=')[1]}+{9000 + n:010d}.snappy.parquet"
        pq.write_table(hostile, path)
        written.append(path)
    spark_side = _spark_counts(dbt, landing, schema, producer, [p.relative_to(folder).as_posix() for p in written])
    python_side = {p.name: _python_counts(producer, key, p) for p in written}
    assert python_side == spark_side
    assert any(sum(counts) for counts in python_side.values()), "no hostile event: the test proves nothing"
