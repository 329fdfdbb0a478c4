"""The live source as the oracle (issue 28): each live current-state table against its PostgreSQL table,
once the workload has stopped, the capture has drained and a run has applied the files.

Equal means the same keys, the same columns, each of the Spark type that PostgreSQL's type maps to
(`spark_type_of`), and every value equal. Values are compared as text that both sides render in SQL
the same way (`postgres_text`, `spark_text`): an exact comparison, with no driver's conversion in
between. The type mapping:

    smallint, integer -> int (Avro has no 16-bit int: Debezium writes smallint as int32)
    bigint -> bigint;  numeric(p,s) -> decimal(p,s);  boolean -> boolean;  text -> string
    date -> date;  timestamp -> timestamp (its wall clock as UTC);  timestamptz -> timestamp (UTC)
    jsonb -> string (PostgreSQL's text form);  uuid -> string;  bytea -> binary;  text[] -> array<string>
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import psycopg

from python_hooks.live.config import LiveTable
from python_hooks.project.sql import quote_ident, quoted_relation

# A prefix on every value a Spark query returns: dbt's agate table would otherwise read '007' as a
# number and '2026-11-01' as a date; with it every value stays the text Spark rendered.
_TEXT = "v:"


@dataclass(frozen=True)
class SourceColumn:
    """A PostgreSQL column: information_schema's data_type (and udt_name), precision and scale."""

    name: str
    data_type: str
    udt_name: str
    precision: int | None = None
    scale: int | None = None


def spark_type_of(column: SourceColumn) -> str:
    """The Spark type a live current-state column must have for this PostgreSQL column."""
    simple = {
        "smallint": "int",
        "integer": "int",
        "bigint": "bigint",
        "boolean": "boolean",
        "text": "string",
        "character varying": "string",
        "date": "date",
        "timestamp without time zone": "timestamp",
        "timestamp with time zone": "timestamp",
        "jsonb": "string",
        "json": "string",
        "uuid": "string",
        "bytea": "binary",
    }
    if column.data_type == "numeric":
        return f"decimal({column.precision},{column.scale})"
    if column.data_type == "ARRAY":
        element = SourceColumn(column.name, column.udt_name.lstrip("_"), "")
        element_type = {"int4": "integer", "int8": "bigint", "int2": "smallint", "bool": "boolean"}.get(
            element.data_type, element.data_type
        )
        return f"array<{spark_type_of(SourceColumn(column.name, element_type, ''))}>"
    if column.data_type not in simple:
        raise ValueError(f"{column.name}: no mapping for PostgreSQL type {column.data_type}")
    return simple[column.data_type]


def postgres_text(column: SourceColumn) -> str:
    """SQL rendering a PostgreSQL column as the text `spark_text` renders its Spark column as."""
    name = quote_pg(column.name)
    if column.data_type == "timestamp with time zone":
        return f"to_char({name} at time zone 'UTC', 'YYYY-MM-DD HH24:MI:SS.US')"
    if column.data_type == "timestamp without time zone":
        return f"to_char({name}, 'YYYY-MM-DD HH24:MI:SS.US')"
    if column.data_type == "date":
        return f"to_char({name}, 'YYYY-MM-DD')"
    if column.data_type == "bytea":
        return f"upper(encode({name}, 'hex'))"
    if column.data_type == "ARRAY":
        return f"array_to_json({name})::text"
    return f"{name}::text"


def spark_text(name: str, spark_type: str) -> str:
    """SQL rendering a Spark column as text (the session's time zone is UTC: profiles/profiles.yml)."""
    column = quote_ident(name)
    if spark_type == "timestamp":
        value = f"date_format({column}, 'yyyy-MM-dd HH:mm:ss.SSSSSS')"
    elif spark_type == "binary":
        value = f"hex({column})"
    elif spark_type.startswith(("array<", "struct<", "map<")):
        value = f"to_json({column})"
    else:
        value = f"cast({column} as string)"
    return f"concat('{_TEXT}', {value})"


def quote_pg(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


@dataclass
class TableComparison:
    """One table's comparison: rows on each side and the differences found (empty: equal)."""

    table: str
    relation: str
    source_rows: int = 0
    lake_rows: int = 0
    differences: list[str] = field(default_factory=list)

    @property
    def equal(self) -> bool:
        return not self.differences

    def line(self, shown: int = 5) -> str:
        head = f"{self.table}: {self.source_rows} rows in PostgreSQL, {self.lake_rows} in {self.relation}"
        if self.equal:
            return f"{head}: equal"
        more = len(self.differences) - shown
        listed = "; ".join(self.differences[:shown]) + (f"; and {more} more" if more > 0 else "")
        return f"{head}: {len(self.differences)} difference(s): {listed}"


@dataclass
class SnapshotComparison:
    """A live table's dbt snapshot against the current-state table it follows: its versions and keys, and
    whether each key's latest version is the table's row (a deletion version: a key the table lacks)."""

    snapshot: str
    relation: str
    versions: int = 0
    keys: int = 0
    differences: list[str] = field(default_factory=list)

    @property
    def equal(self) -> bool:
        return not self.differences

    def line(self) -> str:
        head = f"{self.snapshot}: {self.versions} versions of {self.keys} keys"
        if self.equal:
            return f"{head}: the latest versions equal {self.relation}"
        return f"{head}: {'; '.join(self.differences)}"


def compare_snapshot(
    warehouse, snapshot: tuple[str, str], table: tuple[str, str], key: Sequence[str]
) -> SnapshotComparison:
    """The snapshot `snapshot` (schema, identifier) against the current-state table `table`: each key's
    latest version (by `dbt_valid_from`), unless a deletion version (`dbt_is_deleted`, `hard_deletes:
    new_record`), must equal the table's row in every column both have (not the pipeline's `_cdc_` ones)."""
    snapshot_relation, table_relation = quoted_relation(*snapshot), quoted_relation(*table)
    result = SnapshotComparison(snapshot[1], f"{table[0]}.{table[1]}")
    snapshot_types = dict(warehouse.columns(*snapshot) or [])
    table_types = dict(warehouse.columns(*table) or [])
    if not snapshot_types or not table_types:
        result.differences.append(f"{'.'.join(snapshot if not snapshot_types else table)} does not exist")
        return result
    columns = [quote_ident(c) for c in table_types if not c.startswith("_cdc_") and c in snapshot_types]
    keys = ", ".join(quote_ident(k) for k in key)
    live = "coalesce(dbt_is_deleted <> 'True', true)" if "dbt_is_deleted" in snapshot_types else "true"
    listed = ", ".join(columns)
    versions, key_count, only_snapshot, only_table = warehouse.query(
        f"""
        with ranked as (
            select *, row_number() over (partition by {keys} order by dbt_valid_from desc) as version_rank
            from {snapshot_relation}
        ),
        latest as (select {listed} from ranked where version_rank = 1 and {live}),
        state as (select {listed} from {table_relation})
        select
            (select count(*) from {snapshot_relation}),
            (select count(distinct {keys}) from {snapshot_relation}),
            (select count(*) from (select * from latest except all select * from state) as only_snapshot),
            (select count(*) from (select * from state except all select * from latest) as only_table)
        """
    )[0]
    result.versions, result.keys = int(versions), int(key_count)
    if only_snapshot or only_table:
        result.differences.append(
            f"{only_snapshot} latest version(s) not in {result.relation},"
            f" {only_table} row(s) of it not a latest version"
        )
    return result


def source_columns(connection: psycopg.Connection, schema: str, table: str) -> list[SourceColumn]:
    rows = connection.execute(
        "select column_name, data_type, udt_name, numeric_precision, numeric_scale"
        " from information_schema.columns where table_schema = %s and table_name = %s order by ordinal_position",
        (schema, table),
    ).fetchall()
    return [SourceColumn(*row) for row in rows]


def compare_table(
    connection: psycopg.Connection,
    warehouse,
    table: LiveTable,
    schema: str,
    identifier: str,
) -> TableComparison:
    """`table` in PostgreSQL against the current-state table `schema`.`identifier`."""
    relation = f"{schema}.{identifier}"
    result = TableComparison(table.name, relation)
    columns = source_columns(connection, table.schema, table.name)
    lake_types = {name.lower(): spark_type for name, spark_type in warehouse.columns(schema, identifier) or []}
    if not lake_types:
        result.differences.append(f"{relation} does not exist")
        return result
    compared = []
    for column in columns:
        expected = spark_type_of(column)
        found = lake_types.get(column.name.lower())
        if found is None:
            result.differences.append(f"column {column.name} ({column.data_type}) is missing")
        elif found != expected:
            result.differences.append(
                f"column {column.name}: {found}, expected {expected} (PostgreSQL {column.data_type})"
            )
        else:
            compared.append(column)
    extra = sorted(
        set(lake_types) - {c.name.lower() for c in columns} - {n for n in lake_types if n.startswith("_cdc_")}
    )
    result.differences.extend(f"column {name} is not in PostgreSQL" for name in extra)
    key_index = [next(i for i, c in enumerate(compared) if c.name == k) for k in table.key]

    source = connection.execute(
        "select "
        + ", ".join(postgres_text(c) for c in compared)
        + f" from {quote_pg(table.schema)}.{quote_pg(table.name)}"
    ).fetchall()
    lake = [
        tuple(None if value is None else str(value)[len(_TEXT) :] for value in row)
        for row in warehouse.query(
            "select "
            + ", ".join(spark_text(c.name, lake_types[c.name.lower()]) for c in compared)
            + f" from {quote_ident(schema)}.{quote_ident(identifier)}"
        )
    ]
    result.source_rows, result.lake_rows = len(source), len(lake)
    result.differences.extend(row_differences([c.name for c in compared], key_index, source, lake))
    return result


def row_differences(
    names: Sequence[str], key_index: Sequence[int], source: Sequence[tuple], lake: Sequence[tuple]
) -> list[str]:
    """Keys only on one side, keys twice, and each differing value: `name` key: PostgreSQL value, lake value."""

    def by_key(rows: Sequence[tuple], side: str, differences: list[str]) -> Mapping[tuple, tuple]:
        keyed: dict[tuple, tuple] = {}
        for row in rows:
            key = tuple(row[i] for i in key_index)
            if key in keyed:
                differences.append(f"key {_key(key)} twice in {side}")
            keyed[key] = row
        return keyed

    differences: list[str] = []
    expected, found = by_key(source, "PostgreSQL", differences), by_key(lake, "the lake", differences)
    for key in sorted(set(expected) - set(found), key=str):
        differences.append(f"key {_key(key)} missing")
    for key in sorted(set(found) - set(expected), key=str):
        differences.append(f"key {_key(key)} not in PostgreSQL")
    for key in sorted(set(expected) & set(found), key=str):
        for name, want, got in zip(names, expected[key], found[key], strict=True):
            if want != got:
                differences.append(f"{name} at key {_key(key)}: PostgreSQL {_short(want)}, lake {_short(got)}")
    return differences


def _key(key: tuple) -> str:
    return ",".join(str(part) for part in key)


def _short(value: str | None, limit: int = 60) -> str:
    if value is None:
        return "null"
    return repr(value) if len(value) <= limit else repr(value[:limit]) + f"...({len(value)} chars)"
