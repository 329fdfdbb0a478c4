"""How the hooks read a table's columns from a schema's listing (python_hooks/project/warehouse.py:
iceberg_columns): Iceberg's schema JSON in the metastore's `current-schema` property, spelled as Spark's
`describe` spells the types; anything it cannot spell sends the caller to `describe`."""

from __future__ import annotations

import json

from python_hooks.project.warehouse import iceberg_columns


def _information(fields: list, before: str = "Owner: root\nTable Properties: [DO_NOT_UPDATE_STATS=true, ") -> str:
    schema = {"type": "struct", "schema-id": 3, "fields": fields}
    return f"{before}current-schema={json.dumps(schema, separators=(',', ':'))}, owner=root]\nSchema: root\n"


def _field(number: int, name: str, kind) -> dict:
    return {"id": number, "name": name, "required": False, "type": kind}


def test_primitive_types_are_spelled_as_describe_spells_them() -> None:
    kinds = {
        "int": "int",
        "long": "bigint",
        "decimal(38, 10)": "decimal(38,10)",
        "timestamptz": "timestamp",
        "timestamp": "timestamp_ntz",
        "uuid": "string",
        "fixed[16]": "binary",
        "boolean": "boolean",
    }
    fields = [_field(i, f"c{i}, x=[{i}]", kind) for i, kind in enumerate(kinds, 1)]
    assert iceberg_columns(_information(fields)) == [(f"c{i}, x=[{i}]", t) for i, t in enumerate(kinds.values(), 1)]


def test_what_it_cannot_spell_sends_the_caller_to_describe() -> None:
    nested = _field(2, "n", {"type": "list", "element-id": 3, "element": "int", "element-required": False})
    assert iceberg_columns(_information([_field(1, "a", "int"), nested])) is None
    assert iceberg_columns(_information([_field(1, "a", "time")])) is None
    assert iceberg_columns("Owner: root\nTable Properties: [owner=root]\nSchema: root\n") is None  # too long to keep
    assert iceberg_columns('Table Properties: [current-schema={"type":"str') is None  # cut short


def test_the_information_handed_to_dbt_keeps_what_its_cache_reads_and_is_small():
    from python_hooks.project.warehouse import relation_information

    schema = (
        '{"type":"struct","fields":['
        + ",".join(f'{{"id":{i},"name":"c{i}","type":"string"}}' for i in range(300))
        + "]}"
    )
    table = (
        "Catalog: spark_catalog\nDatabase: s_current\nTable: t\nOwner: root\nType: MANAGED\nProvider: iceberg\n"
        f"Table Properties: [current-schema={schema}, table_type=ICEBERG, write.merge.mode=merge-on-read]\n"
        "Location: file:/w/s_current.db/t\nSchema: root\n |-- c0: string (nullable = true)\n"
    )
    view = (
        "Catalog: spark_catalog\nDatabase: s_staging\nTable: v\nType: VIEW\nView Text: select 1 as c0\nSchema: root\n"
    )
    kept = relation_information(table)
    assert "Type: MANAGED" in kept and "Provider: iceberg" in kept and "table_type=ICEBERG" in kept
    assert "current-schema" not in kept and "Schema: root" not in kept and len(kept) < 250
    assert "Type: VIEW" in relation_information(view) and "View Text" not in relation_information(view)
    assert "ICEBERG" not in relation_information(view)


class _Adapter:
    """Answers `show tables` from `tables`, and a query of `.refs` when every table it reads exists."""

    def __init__(self, tables: set[str]) -> None:
        self.tables, self.statements = tables, []

    def connection_named(self, name):
        import contextlib

        return contextlib.nullcontext()

    def execute(self, sql: str, fetch: bool = False):
        import re
        from types import SimpleNamespace

        self.statements.append(sql)
        if sql.startswith("show tables in"):
            rows = [("s_cdc_meta", name, False) for name in sorted(self.tables)]
            return None, SimpleNamespace(rows=rows, column_names=["namespace", "tableName", "isTemporary"])
        read = re.findall(r"`s_cdc_meta`\.`(\w+)`\.refs", sql)
        missing = [name for name in read if name not in self.tables]
        if missing:
            raise RuntimeError(f"[TABLE_OR_VIEW_NOT_FOUND] {missing[0]}")
        return None, SimpleNamespace(rows=[tuple(len(name) for name in read)], column_names=read)


def test_one_query_of_the_meta_tables_snapshots_says_they_exist_and_a_listing_only_when_one_is_missing():
    from python_hooks.project.meta import META_TABLES, SNAPSHOT_TABLES
    from python_hooks.project.warehouse import Warehouse

    adapter = _Adapter(set(META_TABLES) | {"landing__probe"})
    warehouse = Warehouse(adapter, "local", "s")
    assert warehouse.has_meta_tables(META_TABLES)
    assert warehouse.table_exists("s_cdc_meta", SNAPSHOT_TABLES[0])
    assert warehouse.meta_snapshots() == {name: str(len(name)) for name in SNAPSHOT_TABLES}
    assert len(adapter.statements) == 1 and "s_cdc_meta" in warehouse.existing_schemas
    assert warehouse.table_exists("s_cdc_meta", "landing__probe")  # a table the query did not read: listed
    assert adapter.statements[1] == "show tables in `s_cdc_meta`"

    adapter = _Adapter(set(META_TABLES) - {META_TABLES[-1]})
    warehouse = Warehouse(adapter, "local", "s")
    assert not warehouse.has_meta_tables(META_TABLES)
    assert [s.split(" ", 1)[0] for s in adapter.statements] == ["select", "show"]
    assert warehouse.meta_snapshots() == {name: str(len(name)) for name in SNAPSHOT_TABLES}
