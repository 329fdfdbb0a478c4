"""Whole tables read from Spark and compared with what a replay expects."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence


def normalise(value):
    """A time-zone-aware timestamp as the naive UTC one Spark returns, also inside a struct or a list; a struct
    as the dict of its fields, whether pyspark's Row (Spark's side) or a dict (pyarrow's, a replay's); any other
    value as it is."""
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    if hasattr(value, "asDict"):  # a struct column's value as pyspark returns it
        value = value.asDict()
    if isinstance(value, dict):
        return {k: normalise(v) for k, v in value.items()}
    if isinstance(value, list):
        return [normalise(v) for v in value]
    return value


_EPOCH = dt.datetime(1970, 1, 1)


def table_rows(spark, relation: str, key: Sequence[str], columns: Iterable[str]) -> dict[tuple, dict]:
    """The whole table as key tuple -> {column: value} for the given columns. Timestamps are read as microseconds
    and made naive UTC datetimes here: pyspark's own conversion (datetime.fromtimestamp) fails on year 1, which
    a raw file may hold (the fuzz library's extreme values)."""
    columns = list(columns)
    table = spark.table(relation)
    stamps = {f.name.lower() for f in table.schema.fields if f.dataType.typeName() == "timestamp"}
    quoted = {c: "`" + c.replace("`", "``") + "`" for c in columns}
    rows = table.selectExpr(
        *(f"unix_micros({quoted[c]}) as {quoted[c]}" if c.lower() in stamps else quoted[c] for c in columns)
    ).collect()
    result = {}
    for row in rows:
        record = {
            c: _EPOCH + dt.timedelta(microseconds=row[c])
            if c.lower() in stamps and row[c] is not None
            else normalise(row[c])
            for c in columns
        }
        k = tuple(record[c] for c in key)
        assert k not in result, f"{relation}: duplicate key {k}"
        result[k] = record
    return result


def assert_same_table(actual: dict[tuple, dict], expected: dict[tuple, dict], label: str) -> None:
    """Whole-table equality with a readable difference."""
    expected = {k: {c: normalise(v) for c, v in row.items()} for k, row in expected.items()}
    missing = sorted(set(expected) - set(actual))
    extra = sorted(set(actual) - set(expected))
    differing = {
        k: {c: (actual[k].get(c), v) for c, v in expected[k].items() if actual[k].get(c) != v}
        for k in set(actual) & set(expected)
    }
    differing = {k: d for k, d in differing.items() if d}
    assert not (missing or extra or differing), (
        f"{label}: missing keys {missing}, unexpected keys {extra}, "
        f"differing (actual, expected): {dict(sorted(differing.items())[:10])}"
    )


def snapshot_ids(spark, relation: str) -> list[int]:
    return [r[0] for r in spark.sql(f"select snapshot_id from {relation}.snapshots order by committed_at").collect()]
