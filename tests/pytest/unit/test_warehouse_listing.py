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
    from python_hooks.project.warehouse import listed_value, relation_information

    schema = (
        '{"type":"struct","fields":['
        + ",".join(f'{{"id":{i},"name":"c{i}","type":"string"}}' for i in range(300))
        + "]}"
    )
    table = (
        "Catalog: spark_catalog\nDatabase: s_current\nTable: t\nOwner: root\nType: MANAGED\nProvider: iceberg\n"
        f"Table Properties: [current-schema={schema}, snapshot-count=3, table_type=ICEBERG, "
        "write.merge.mode=merge-on-read]\n"
        "Location: file:/w/s_current.db/t\nSchema: root\n |-- c0: string (nullable = true)\n"
    )
    view = (
        "Catalog: spark_catalog\nDatabase: s_staging\nTable: v\nType: VIEW\nView Text: select 1 as c0\nSchema: root\n"
    )
    kept = relation_information(table)
    assert "Type: MANAGED" in kept and "Provider: iceberg" in kept and "table_type=ICEBERG" in kept
    assert "current-schema" not in kept and "Schema: root" not in kept and len(kept) < 250
    assert listed_value(kept, "snapshot-count") == "3"  # what the table materialization reads
    assert "Type: VIEW" in relation_information(view) and "View Text" not in relation_information(view)
    assert "ICEBERG" not in relation_information(view)


class _Adapter:
    """A warehouse whose meta schema holds `tables`, each listed as Iceberg's Hive catalog lists it: a snapshot id
    (the length of its name), none for the names in `empty`, and no snapshot properties at all for those in
    `other_catalog`. Answers `show table extended ... like 'a|b'`, `show tables` and a query of `.refs`; `failing`:
    the listing fails as it does when the metastore cannot parse a table (`missing_schema`: as when there is no
    schema)."""

    def __init__(self, tables, empty=(), other_catalog=(), failing=False, missing_schema=False) -> None:
        self.tables, self.empty, self.other_catalog = set(tables), set(empty), set(other_catalog)
        self.failing, self.missing_schema, self.statements = failing, missing_schema, []

    def connection_named(self, name):
        import contextlib

        return contextlib.nullcontext()

    def _information(self, name: str) -> str:
        schema = (
            '{"type":"struct","fields":[{"id":1,"name":"x, current-snapshot-id=7, snapshot-count=1","type":"int"}]}'
        )
        stats = "" if name in self.empty else f"current-snapshot-id={len(name)}, "
        stats = "" if name in self.other_catalog else f"{stats}snapshot-count={0 if name in self.empty else 3}, "
        return f"Table: {name}\nTable Properties: [current-schema={schema}, {stats}table_type=ICEBERG]\n"

    def execute(self, sql: str, fetch: bool = False):
        import re
        from types import SimpleNamespace

        self.statements.append(sql)
        if self.missing_schema:
            raise RuntimeError("[SCHEMA_NOT_FOUND] The schema `s_cdc_meta` cannot be found.")
        if sql.startswith("show table extended in `s_cdc_meta` like "):
            if self.failing:
                raise RuntimeError("org.apache.hadoop.hive.ql.metadata.HiveException: cannot parse a type")
            wanted = sql.split(" like ", 1)[1].strip("'").split("|")
            rows = [("s_cdc_meta", n, False, self._information(n)) for n in sorted(self.tables) if n in wanted]
            return None, SimpleNamespace(
                rows=rows, column_names=["namespace", "tableName", "isTemporary", "information"]
            )
        if sql.startswith("show tables in"):
            rows = [("s_cdc_meta", name, False) for name in sorted(self.tables)]
            return None, SimpleNamespace(rows=rows, column_names=["namespace", "tableName", "isTemporary"])
        read = re.findall(r"`s_cdc_meta`\.`(\w+)`\.refs", sql)
        missing = [name for name in read if name not in self.tables]
        if missing:
            raise RuntimeError(f"[TABLE_OR_VIEW_NOT_FOUND] {missing[0]}")
        return None, SimpleNamespace(rows=[tuple(len(name) * 10 for name in read)], column_names=read)


def test_one_listing_of_the_meta_tables_by_name_says_they_exist_and_their_snapshots():
    from python_hooks.project.meta import META_TABLES, SNAPSHOT_TABLES
    from python_hooks.project.warehouse import Warehouse

    adapter = _Adapter(set(META_TABLES) | {"landing__probe"}, empty={SNAPSHOT_TABLES[1]})
    warehouse = Warehouse(adapter, "local", "s")
    assert warehouse.has_meta_tables(META_TABLES)
    assert warehouse.table_exists("s_cdc_meta", SNAPSHOT_TABLES[0])
    expected = {name: str(len(name)) for name in SNAPSHOT_TABLES} | {SNAPSHOT_TABLES[1]: None}
    assert warehouse.meta_snapshots() == expected  # a column's name in the schema JSON is not a property
    assert len(adapter.statements) == 1 and "s_cdc_meta" in warehouse.existing_schemas
    assert adapter.statements[0].endswith(" like '" + "|".join(META_TABLES) + "'")  # not the raw or landing tables
    assert warehouse.table_exists("s_cdc_meta", "landing__probe")  # a table the listing did not name: listed
    assert adapter.statements[1] == "show tables in `s_cdc_meta`"

    warehouse.execute("insert into `s_cdc_meta`.`cdc_file_ledger` values (1)", tables_changed=False)
    assert warehouse.meta_snapshots() == expected and adapter.statements[-1].startswith("show table extended")
    assert len(adapter.statements) == 4  # a commit may have come: listed again


def test_a_missing_meta_table_or_schema_is_told_by_the_same_listing():
    from python_hooks.project.meta import META_TABLES, SNAPSHOT_TABLES
    from python_hooks.project.warehouse import Warehouse

    adapter = _Adapter(set(META_TABLES) - {META_TABLES[-1]})
    warehouse = Warehouse(adapter, "local", "s")
    assert not warehouse.has_meta_tables(META_TABLES)
    assert warehouse.meta_snapshots() == {name: str(len(name)) for name in SNAPSHOT_TABLES}
    assert len(adapter.statements) == 1

    adapter = _Adapter(set(), missing_schema=True)
    warehouse = Warehouse(adapter, "local", "s")
    assert not warehouse.has_meta_tables(META_TABLES)
    assert warehouse.meta_snapshots() == {} and len(adapter.statements) == 1
    assert "s_cdc_meta" not in warehouse.existing_schemas


def test_without_the_snapshot_properties_or_the_listing_the_refs_are_asked():
    from python_hooks.project.meta import META_TABLES, SNAPSHOT_TABLES
    from python_hooks.project.warehouse import Warehouse

    adapter = _Adapter(set(META_TABLES), other_catalog={SNAPSHOT_TABLES[0]})
    warehouse = Warehouse(adapter, "local", "s")
    expected = {name: str(len(name)) for name in SNAPSHOT_TABLES} | {
        SNAPSHOT_TABLES[0]: str(len(SNAPSHOT_TABLES[0]) * 10)
    }
    assert warehouse.meta_snapshots() == expected
    assert [s.split(" ", 1)[0] for s in adapter.statements] == ["show", "select"]
    assert ".refs" in adapter.statements[1] and SNAPSHOT_TABLES[1] not in adapter.statements[1]

    adapter = _Adapter(set(META_TABLES) - {META_TABLES[-1]}, failing=True)
    warehouse = Warehouse(adapter, "local", "s")
    assert not warehouse.has_meta_tables(META_TABLES)
    assert warehouse.meta_snapshots() == {name: str(len(name) * 10) for name in SNAPSHOT_TABLES}
    assert [s.split(" ", 2)[:2] for s in adapter.statements] == [
        ["show", "table"],
        ["show", "tables"],
        ["select", "(select"],
    ]
