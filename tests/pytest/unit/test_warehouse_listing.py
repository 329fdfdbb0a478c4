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
