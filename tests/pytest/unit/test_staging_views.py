"""Which staging views `make run` leaves as they are, without Spark: the fingerprint of what a view's
SQL is made of, and how the view's own listed properties say it was built from the same
(python_hooks/evolution/staging_views.py, Warehouse.listed_property)."""

from __future__ import annotations

from types import SimpleNamespace

from python_hooks.evolution.staging_views import PROPERTY, fingerprint, fingerprints, source_text, unchanged
from python_hooks.project.warehouse import Warehouse


def _node(name: str = "stg_crm__customer", code: str = "{{ stg_dms_changes('crm', 'customer') }}", **config):
    return SimpleNamespace(
        name=name,
        unique_id=f"model.cdc_lakehouse.{name}",
        relation_name=f"`s_staging`.`{name}`",
        raw_code=code,
        config={"materialized": "view", **config},
        resource_type="model",
        schema="s_staging",
        alias=name,
        depends_on=SimpleNamespace(nodes=["source.cdc_lakehouse.crm.customer"]),
    )


def _source(**meta):
    return SimpleNamespace(
        unique_id="source.cdc_lakehouse.crm.customer",
        identifier="/landing/dms/crm/customer",
        meta=meta,
        source_meta={},
        columns={"id": SimpleNamespace(data_type="int", meta={})},
    )


def test_the_fingerprint_follows_every_input_of_the_view_sql():
    base = fingerprint(_node(), "schema-a", "code", "registers")
    assert fingerprint(_node(), "schema-a", "code", "registers") == base
    assert fingerprint(_node(), "schema-b", "code", "registers") != base  # raw union schema or file groups
    assert fingerprint(_node(), "schema-a", "code-2", "registers") != base  # a macro of the project
    assert fingerprint(_node(), "schema-a", "code", "registers-2") != base  # an erasure or rectification
    assert fingerprint(_node(code="select 1"), "schema-a", "code", "registers") != base  # the model
    assert fingerprint(_node(schema="x"), "schema-a", "code", "registers") != base  # its config
    with_source = fingerprint(_node(), "schema-a", "code", "registers", source_text(_source()))
    assert with_source != base
    moved = _source()
    moved.identifier = "/elsewhere/customer"
    assert fingerprint(_node(), "schema-a", "code", "registers", source_text(moved)) != with_source
    subjects = source_text(_source(cdc_subjects={"customer": "id"}))
    assert fingerprint(_node(), "schema-a", "code", "registers", subjects) != with_source


def test_only_views_with_inputs_get_a_fingerprint():
    manifest = SimpleNamespace(
        nodes={n.unique_id: n for n in (_node("stg_a"), _node("stg_b"), _node("stg_t", materialized="table"))},
        sources={"source.cdc_lakehouse.crm.customer": _source()},
        macros={},
        metadata=SimpleNamespace(project_name="cdc_lakehouse"),
    )
    found = fingerprints(manifest, ["stg_a", "stg_b", "stg_t", "stg_missing"], {"stg_a": "x", "stg_t": "y"}, "")
    assert list(found) == ["stg_a"]
    assert found["stg_a"][:2] == ("s_staging", "stg_a")


def test_a_view_is_unchanged_only_with_the_same_fingerprint_and_relation_listed():
    found = {"stg_a": ("S", "stg_A", "f1"), "stg_b": ("s", "stg_b", "f2")}
    assert unchanged(found, {}) == set(), "nothing built yet"
    assert unchanged(found, {("s", "stg_a"): "f1", ("s", "stg_b"): "f2"}) == {"stg_a", "stg_b"}
    assert unchanged(found, {("s", "stg_a"): "f1"}) == {"stg_a"}, "stg_b dropped, or built by a plain dbt run"
    assert unchanged(found, {("s", "stg_a"): "f9", ("s", "stg_b"): "f2"}) == {"stg_b"}, "new fingerprint"
    assert unchanged(found, {("t", "stg_a"): "f1"}) == set(), "other schema"


# A view's and a table's rows of `show table extended` as Spark 3.5 with Iceberg 1.12 prints them (shortened).
VIEW_INFORMATION = """Catalog: spark_catalog
Database: s
Table: stg_a
Type: VIEW
View Text: select a from s.t
Table Properties: [cdc_fingerprint=%s, current-schema={"type":"struct","fields":[{"id":0,"name":"x, cdc_fingerprint=f0"\
,"required":false,"type":"int"}]}, table_type=ICEBERG-VIEW]
Location: file:/w/s.db/stg_a
"""
TABLE_INFORMATION = """Catalog: spark_catalog
Database: s
Table: t
Type: EXTERNAL
Table Properties: [current-schema={"type":"struct"}, table_type=ICEBERG]
"""


class _Listed(Warehouse):
    def __init__(self, rows):
        super().__init__(adapter=None, target="local", schema="s")
        self.rows, self.statements = rows, 0

    def records(self, sql):
        self.statements += 1
        return self.rows


def test_the_listing_gives_each_views_fingerprint_and_nothing_for_others():
    listed = _Listed(
        [
            {"namespace": "s", "tableName": "stg_A", "isTemporary": False, "information": VIEW_INFORMATION % ("a" * 9)},
            {"namespace": "s", "tableName": "t", "isTemporary": False, "information": TABLE_INFORMATION},
            {"namespace": "", "tableName": "tmp", "isTemporary": True, "information": VIEW_INFORMATION % "b"},
        ]
    )
    assert listed.listed_property("S", PROPERTY) == {"stg_a": "a" * 9}, "a column's name is not a property"
    assert listed.listed_property("s", PROPERTY) == {"stg_a": "a" * 9}
    assert listed.statements == 1, "one listing per schema"
