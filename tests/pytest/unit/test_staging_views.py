"""Which staging views `make run` leaves as they are, without Spark: the fingerprint of what a view's
SQL is made of, and the state that remembers the views built (python_hooks/evolution/staging_views.py)."""

from __future__ import annotations

from types import SimpleNamespace

from python_hooks.evolution.staging_views import StagingViews, fingerprint, fingerprints, source_text


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


def test_a_view_is_unchanged_only_with_the_same_fingerprint_relation_and_still_there(tmp_path):
    views = StagingViews(tmp_path)
    found = {"stg_a": ("s", "stg_a", "f1"), "stg_b": ("s", "stg_b", "f2")}
    assert views.unchanged(found, lambda schema, identifier: True) == set(), "nothing built yet"
    views.record(found)

    again = StagingViews(tmp_path)  # read back from the state file
    assert again.unchanged(found, lambda schema, identifier: True) == {"stg_a", "stg_b"}
    assert again.unchanged(found, lambda schema, identifier: identifier != "stg_b") == {"stg_a"}, "dropped"
    assert again.unchanged({"stg_a": ("s", "stg_a", "f9")}, lambda *_: True) == set(), "new fingerprint"
    assert again.unchanged({"stg_a": ("t", "stg_a", "f1")}, lambda *_: True) == set(), "other schema"

    again.record({}, failed=["stg_b"])
    assert StagingViews(tmp_path).unchanged(found, lambda *_: True) == {"stg_a"}, "a failed build is forgotten"


def test_a_damaged_state_file_builds_every_view_again(tmp_path):
    (tmp_path / "staging_views.json").write_text("{not json", encoding="utf-8")
    views = StagingViews(tmp_path)
    assert views.unchanged({"stg_a": ("s", "stg_a", "f1")}, lambda *_: True) == set()
    views.record({"stg_a": ("s", "stg_a", "f1")})
    assert StagingViews(tmp_path).unchanged({"stg_a": ("s", "stg_a", "f1")}, lambda *_: True) == {"stg_a"}
