"""The docs coverage check (python_hooks/commands/docs.py, scripts/check_docs_coverage.py) and the catalog's
live row counts, on small synthetic manifest and catalog dicts: no dbt run, no Spark."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from python_hooks.commands.docs import ROWS_LABEL, Count, catalog_tables, patch_catalog, write_static_index
from python_hooks.commands.docs_coverage import EVOLUTION_FILE, AddedColumn, catalog_findings, check, main
from python_hooks.project.sql import relation_parts

P = "cdc_lakehouse"
SOURCE = f"source.{P}.crm.customer_master"
STAGING = f"model.{P}.stg_crm__customer_master"
CURRENT = f"model.{P}.crm__customer_master"
SNAPSHOT = f"snapshot.{P}.customer_snapshot"
MART = f"model.{P}.dim_customer"
ORDERS = f"model.{P}.salesdb__sales_order"  # not in the customer's lineage
EVOLVED = AddedColumn("`t_1_current`.`crm__customer_master`", "credit_limit", "2026-11-06 09:00:01.5")


def _column(name: str, description: str = "described") -> dict:
    return {"name": name, "description": description}


def _node(unique_id: str, schema: str, columns: list[str], parents: list[str], yml: str | None, **extra) -> dict:
    kind, _, name = unique_id.split(".")
    return {
        "resource_type": kind,
        "package_name": P,
        "name": name,
        "schema": schema,
        "relation_name": f"`{schema}`.`{name}`",
        "description": f"{name} described",
        "original_file_path": yml if kind == "snapshot" else f"models/{name}.sql",
        "patch_path": None if kind == "snapshot" else f"{P}://{yml}",
        "columns": {c: _column(c) for c in columns},
        "depends_on": {"nodes": parents},
        **extra,
    }


def manifest() -> dict:
    nodes = [
        _node(STAGING, "t_1_staging", ["customer_id"], [SOURCE], "models/staging/crm/_crm__models.yml"),
        _node(CURRENT, "t_1_current", ["customer_id"], [STAGING], "models/current_state/crm/_crm__models.yml"),
        _node(SNAPSHOT, "t_1_snapshots", ["customer_id"], [CURRENT], "snapshots/customer_snapshot.yml"),
        _node(MART, "t_1_marts", ["customer_id"], [SNAPSHOT], "models/marts/_marts__models.yml"),
        _node(ORDERS, "t_1_current", ["order_id"], [], "models/current_state/salesdb/_salesdb__models.yml"),
    ]
    test = {
        "resource_type": "test",
        "package_name": P,
        "depends_on": {"nodes": [ORDERS, CURRENT]},  # a relationships test links both: not lineage
        "columns": {},
    }
    source = {
        "resource_type": "source",
        "package_name": P,
        "source_name": "crm",
        "name": "customer_master",
        "source_description": "the CRM",
        "description": "customers",
        "original_file_path": "models/staging/crm/_crm__sources.yml",
        "relation_name": "parquet.`/landing/dms/crm/customer_master`",
        "columns": {"customer_id": _column("customer_id")},
    }
    return {
        "metadata": {"project_name": P},
        "nodes": {**{n["resource_type"] + f".{P}." + n["name"]: n for n in nodes}, f"test.{P}.rel": test},
        "sources": {SOURCE: source},
        "exposures": {},
    }


def _entry(schema: str, name: str, columns: list[str], kind: str = "table", rows: int | None = None) -> dict:
    stats = {"has_stats": {"id": "has_stats", "label": "Has Stats?", "value": rows is not None, "include": False}}
    if rows is not None:
        stats["rows"] = {"id": "rows", "label": "rows", "value": rows, "include": True, "description": ""}
    return {
        "metadata": {"type": kind, "schema": schema, "name": name},
        "columns": {c: {"type": "string", "index": i + 1, "name": c} for i, c in enumerate(columns)},
        "stats": stats,
    }


def catalog(**extra_columns: list[str]) -> dict:
    """Every relation with its documented columns, plus `extra_columns` per node name."""
    relations = {
        STAGING: ("t_1_staging", "stg_crm__customer_master", ["customer_id"], "view", None),
        CURRENT: ("t_1_current", "crm__customer_master", ["customer_id"], "table", 24),
        SNAPSHOT: ("t_1_snapshots", "customer_snapshot", ["customer_id"], "table", 30),
        MART: ("t_1_marts", "dim_customer", ["customer_id"], "table", 30),
        ORDERS: ("t_1_current", "salesdb__sales_order", ["order_id"], "table", 12),
    }
    nodes = {}
    for unique_id, (schema, name, columns, kind, rows) in relations.items():
        nodes[unique_id] = _entry(schema, name, columns + extra_columns.get(name, []), kind, rows)
    return {"metadata": {}, "nodes": nodes, "sources": {}, "errors": None}


def test_relation_parts():
    assert relation_parts("`s_current`.`crm__customer_master`") == ["s_current", "crm__customer_master"]
    assert relation_parts("`db`.`t``x.y`") == ["db", "t`x.y"]
    assert relation_parts("s.t") == ["s", "t"]


def test_an_evolved_column_is_a_warning_where_it_flows_downstream_and_upstream():
    lineage = ["stg_crm__customer_master", "crm__customer_master", "customer_snapshot", "dim_customer"]
    gaps, warnings = catalog_findings(manifest(), catalog(**{name: ["credit_limit"] for name in lineage}), P, [EVOLVED])
    assert gaps == []
    by_node = {warning.split(":")[0].removeprefix("WARNING "): warning for warning in warnings}
    assert sorted(by_node) == sorted([STAGING, CURRENT, SNAPSHOT, MART]) and len(warnings) == 4
    assert by_node[CURRENT] == (
        f"WARNING {CURRENT}: column credit_limit is not in the yml: added by schema evolution on 2026-11-06,"
        " t_1_current.crm__customer_master.credit_limit: describe it in models/current_state/crm/_crm__models.yml"
    )
    assert by_node[SNAPSHOT].endswith("describe it in snapshots/customer_snapshot.yml")
    assert by_node[MART].endswith("describe it in models/marts/_marts__models.yml")
    assert by_node[STAGING].endswith("describe it in models/staging/crm/_crm__models.yml")


def test_names_match_case_insensitively():
    evolved = AddedColumn("`T_1_CURRENT`.`Crm__Customer_Master`", "Credit_Limit", "2026-11-06 09:00:01")
    gaps, warnings = catalog_findings(manifest(), catalog(dim_customer=["CREDIT_LIMIT"]), P, [evolved])
    assert gaps == [] and len(warnings) == 1 and "column CREDIT_LIMIT" in warnings[0]


def test_an_undocumented_column_schema_evolution_did_not_add_fails():
    gaps, warnings = catalog_findings(
        manifest(), catalog(crm__customer_master=["credit_limit", "loyalty_tier"]), P, [EVOLVED]
    )
    assert gaps == [f"{CURRENT}: column loyalty_tier (in the warehouse) is not in the yml"]
    assert len(warnings) == 1


def test_the_same_name_outside_the_evolved_tables_lineage_fails():
    gaps, warnings = catalog_findings(manifest(), catalog(salesdb__sales_order=["credit_limit"]), P, [EVOLVED])
    assert gaps == [f"{ORDERS}: column credit_limit (in the warehouse) is not in the yml"]
    assert warnings == []


def test_a_log_entry_for_a_table_not_in_the_project_excuses_nothing():
    elsewhere = AddedColumn("`other_current`.`crm__customer_master_old`", "credit_limit", "2026-11-06 09:00:00")
    gaps, warnings = catalog_findings(manifest(), catalog(dim_customer=["credit_limit"]), P, [elsewhere])
    assert gaps == [f"{MART}: column credit_limit (in the warehouse) is not in the yml"] and warnings == []


def test_without_the_evolution_log_every_undocumented_column_fails():
    gaps, warnings = catalog_findings(manifest(), catalog(dim_customer=["credit_limit"]), P, [])
    assert len(gaps) == 1 and warnings == []


def _target(tmp_path: Path, manifest_: dict, catalog_: dict | None, added: list[AddedColumn] | None) -> Path:
    (tmp_path / "manifest.json").write_text(json.dumps(manifest_))
    if catalog_ is not None:
        (tmp_path / "catalog.json").write_text(json.dumps(catalog_))
    if added is not None:
        (tmp_path / EVOLUTION_FILE).write_text(json.dumps({"added_columns": [vars(a) for a in added]}))
    return tmp_path


def test_check_reads_the_saved_evolution_log_and_warnings_exit_0(tmp_path, capsys):
    target = _target(tmp_path, manifest(), catalog(dim_customer=["credit_limit"]), [EVOLVED])
    coverage = check(target)
    assert coverage.ok and coverage.gaps == [] and len(coverage.warnings) == 1
    assert main([str(target)]) == 0
    out, err = capsys.readouterr()
    assert out.startswith(f"WARNING {MART}: column credit_limit")
    assert "docs coverage: 0 gap(s), 1 warning(s)" in err


def test_missing_descriptions_fail_even_with_evolution(tmp_path, capsys):
    manifest_ = manifest()
    manifest_["nodes"][MART]["description"] = " "
    manifest_["nodes"][CURRENT]["columns"]["customer_id"]["description"] = ""
    manifest_["sources"][SOURCE]["description"] = None
    target = _target(tmp_path, manifest_, catalog(dim_customer=["credit_limit"]), [EVOLVED])
    coverage = check(target)
    assert sorted(coverage.gaps) == sorted(
        [
            f"{MART} (models/dim_customer.sql): no description",
            f"{CURRENT}: column customer_id has no description",
            f"{SOURCE}: no description",
        ]
    )
    assert len(coverage.warnings) == 1
    assert main([str(target)]) == 1
    assert "docs coverage: 3 gap(s), 1 warning(s)" in capsys.readouterr().err


def test_without_a_catalog_only_the_manifest_is_checked(tmp_path):
    assert check(_target(tmp_path, manifest(), None, None)).ok
    assert main([str(tmp_path / "nowhere")]) == 2


def test_the_script_is_a_thin_wrapper():
    import importlib.util

    script = Path(__file__).resolve().parents[3] / "scripts" / "check_docs_coverage.py"
    spec = importlib.util.spec_from_file_location("check_docs_coverage", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.check is check and module.main is main
    assert "schema_evolution_log" in module.__doc__ and "case-insensitively" in module.__doc__


def test_the_tables_to_count_are_the_catalogs_tables_of_the_project():
    catalog_ = catalog()
    catalog_["nodes"]["model.other_package.x"] = _entry("t_1_marts", "x", [], "table", 1)
    assert [t[0] for t in catalog_tables(catalog_, manifest(), P)] == [CURRENT, MART, ORDERS, SNAPSHOT]


def test_patch_catalog_puts_the_live_rows_in_the_row_count_stat():
    catalog_ = catalog()
    counts = [
        Count(CURRENT, "t_1_current.crm__customer_master", 22, 24),
        Count(MART, "t_1_marts.dim_customer", 30, 30),
        Count(ORDERS, "t_1_current.salesdb__sales_order", None, 12, "boom"),
    ]
    patch_catalog(catalog_, counts, dt.datetime(2026, 11, 6, 10, 0, 0))
    rows = catalog_["nodes"][CURRENT]["stats"]["rows"]
    assert rows["value"] == 22 and rows["label"] == ROWS_LABEL and rows["include"] is True and rows["id"] == "rows"
    assert "numRows said 24" in rows["description"] and "2026-11-06 10:00:00 UTC" in rows["description"]
    assert "numRows" not in catalog_["nodes"][MART]["stats"]["rows"]["description"]
    assert catalog_["nodes"][ORDERS]["stats"]["rows"] == {
        "id": "rows",
        "label": "rows",
        "value": 12,
        "include": True,
        "description": "",
    }  # not counted: the metastore's figure is kept as it was


def test_a_table_without_statistics_gets_the_live_count():
    catalog_ = catalog()
    del catalog_["nodes"][CURRENT]["stats"]["rows"]
    catalog_["nodes"][CURRENT]["stats"]["has_stats"]["value"] = False
    patch_catalog(catalog_, [Count(CURRENT, "t_1_current.crm__customer_master", 5, None)], dt.datetime(2026, 1, 1))
    stats = catalog_["nodes"][CURRENT]["stats"]
    assert stats["rows"]["value"] == 5 and stats["has_stats"]["value"] is True


def test_static_index_inlines_the_patched_catalog_as_dbt_does(tmp_path):
    pytest.importorskip("dbt_common")
    (tmp_path / "index.html").write_text(
        '\n<script>var data = {manifest:"MANIFEST.JSON INLINE DATA",catalog:"CATALOG.JSON INLINE DATA"};</script>\n'
    )
    (tmp_path / "manifest.json").write_text('{"m": 1}\n')
    (tmp_path / "catalog.json").write_text('{"c": 2}')
    write_static_index(tmp_path)
    assert (tmp_path / "static_index.html").read_text() == (
        '<script>var data = {manifest:{"m": 1},catalog:{"c": 2}};</script>'
    )
