"""python_hooks/project/dbt_selection.py: dbt's selection by name from an index yields exactly the nodes, in
the order, that dbt's own search yields, for every kind of name `make run` or a user gives."""

from __future__ import annotations

from types import SimpleNamespace

from dbt.graph.selector_methods import QualifiedNameSelectorMethod

from python_hooks.project import dbt_selection

PACKAGE = "cdc_lakehouse"


def _node(*fqn: str, versioned: bool = False):
    return SimpleNamespace(fqn=list(fqn), is_versioned=versioned)


def _manifest():
    nodes = {}
    for i in range(1, 13):
        table = f"many__t{i:03d}"
        nodes[f"model.{PACKAGE}.stg_{table}"] = _node(PACKAGE, "staging", "many", f"stg_{table}")
        nodes[f"model.{PACKAGE}.{table}"] = _node(PACKAGE, "current", "many", table)
        for test in ("not_null", "unique", "accepted_values"):
            name = f"{test}_{table}_order_id"
            nodes[f"test.{PACKAGE}.{name}.abc{i}"] = _node(PACKAGE, "current", "many", name)
    nodes[f"model.{PACKAGE}.dim_customer.v2"] = _node(PACKAGE, "marts", "dim_customer", "v2", versioned=True)
    nodes[f"model.{PACKAGE}.dim_customer.v3"] = _node(PACKAGE, "marts", "dim_customer", "v3", versioned=True)
    nodes[f"model.{PACKAGE}.a.b"] = _node(PACKAGE, "dotted", "a.b")  # a dot in a name: a namespace separator
    nodes[f"snapshot.{PACKAGE}.many__t001_history"] = _node(PACKAGE, "many__t001_history", "many__t001_history")
    nodes["model.other_package.many__t001"] = _node("other_package", "many__t001")
    empty = {}
    return SimpleNamespace(
        nodes=nodes,
        exposures=empty,
        metrics=empty,
        unit_tests=empty,
        semantic_models=empty,
        saved_queries=empty,
        functions=empty,
    )


SELECTORS = [
    "many__t001",
    "stg_many__t002",
    "not_null_many__t003_order_id",
    PACKAGE,
    "staging",
    "current.many",
    f"{PACKAGE}.staging.many",
    f"{PACKAGE}.current.many.many__t004",
    "other_package",
    "dim_customer",
    "dim_customer.v2",
    "dim_customer_v3",
    "marts.dim_customer.v3",
    "v2",
    "a.b",
    "dotted.a",
    "a",
    "many__t001_history",
    "nothing_of_that_name",
    "many__t00*",  # a wildcard: dbt's own search
    "*history",
    "",
]


def test_the_index_yields_what_dbts_search_yields_in_its_order():
    manifest = _manifest()
    method = QualifiedNameSelectorMethod(manifest, None, [])
    every = set(manifest.nodes)
    some = {n for n in every if "t00" in n or "dim" in n}
    own = {(frozenset(nodes), s): list(method.search(nodes, s)) for nodes in (every, some) for s in SELECTORS}
    dbts = QualifiedNameSelectorMethod.search
    with dbt_selection.indexed_names() as indexed:
        assert indexed and QualifiedNameSelectorMethod.search is not dbts  # the index answers
        for (nodes, selector), expected in own.items():
            assert list(method.search(set(nodes), selector)) == expected, selector
    assert list(method.search(every, "many__t001")) == own[(frozenset(every), "many__t001")]
    assert sum(1 for found in own.values() if found) > len(SELECTORS)  # the names select nodes, not nothing


def test_the_search_is_dbts_own_again_after_the_build():
    original = QualifiedNameSelectorMethod.search
    with dbt_selection.indexed_names():
        assert QualifiedNameSelectorMethod.search is not original
    assert QualifiedNameSelectorMethod.search is original
