"""Whether a table model's build expires the versions it replaced (macros/spark/table.sql:
cdc_replaced_versions_due): a pure macro over the relation dbt's cache listed before the build, rendered
with Jinja as dbt renders it, against the rule in words over python_hooks' own reading of a listing
(`listed_value`). A build that replaced a table listed with 2 snapshots or more expires; one listed with
1 keeps the version it replaced; a listing that does not say expires at every build."""

from __future__ import annotations

import functools
import json
import random
import re
from pathlib import Path
from types import SimpleNamespace

import jinja2
import pytest

from helpers.jinja_macros import call, dbt_return
from python_hooks.project.warehouse import listed_value, relation_information

TABLE_SQL = Path(__file__).resolve().parents[3] / "macros" / "spark" / "table.sql"


@functools.cache
def _macro():
    text = TABLE_SQL.read_text(encoding="utf-8")
    text = text[text.index("{% macro cdc_replaced_versions_due") :]  # the materialization block is dbt's own tag
    environment = jinja2.Environment(extensions=["jinja2.ext.do"])
    module = environment.from_string(text).make_module({"return": dbt_return, "modules": SimpleNamespace(re=re)})
    return module.cdc_replaced_versions_due


def _due(information: str | None) -> bool:
    return call(_macro(), SimpleNamespace(information=information))


def _expected(information: str | None) -> bool:
    count = listed_value(information or "", "snapshot-count")
    return count is None or int(count) >= 2


def _listing(count: int | None, names: list[str]) -> str:
    """A `show table extended` row as Iceberg's Hive catalog lists a table (properties sorted by key)."""
    schema = json.dumps(
        {"type": "struct", "fields": [{"id": i, "name": n, "type": "string"} for i, n in enumerate(names)]}
    )
    properties = [f"current-schema={schema}", *([f"snapshot-count={count}"] if count is not None else [])]
    properties += ["table_type=ICEBERG", "write.format.default=parquet"]
    return (
        "Catalog: spark_catalog\nDatabase: s_marts\nTable: t\nType: MANAGED\nProvider: hive\n"
        f"Table Properties: [{', '.join(properties)}]\nLocation: file:/w/t\nSchema: root\n |-- a: string\n"
    )


@pytest.mark.parametrize(
    ("count", "due"), [(None, True), (0, False), (1, False), (2, True), (3, True), (12, True), (100, True)]
)
def test_a_build_expires_when_its_table_was_listed_with_two_snapshots_or_more(count, due):
    information = _listing(count, ["id", "name"])
    assert _due(information) is due
    assert _due(relation_information(information)) is due  # the listing make run hands dbt


def test_a_relation_without_a_listing_expires_at_every_build():
    assert _due(None) is True and _due("") is True
    assert _due("Catalog: spark_catalog\nTable: t\nType: MANAGED\n") is True


def test_a_column_name_that_looks_like_the_property_does_not_decide():
    names = ["snapshot-count=1,", "x, snapshot-count=0]", "[snapshot-count=1]"]
    assert _due(_listing(5, names)) is True
    assert _due(_listing(1, list(reversed(names)))) is False
    assert _due(relation_information(_listing(None, names))) is True  # make run's listing holds no column name


def test_the_macro_reads_a_listing_as_python_hooks_does():
    rng = random.Random(42)
    alphabet = "ab ,=[]snapshot-count0123456789"
    for _ in range(300):
        names = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 20))) for _ in range(rng.randint(1, 4))]
        count = rng.choice([None, 0, 1, 2, 3, rng.randint(4, 10_000)])
        if count is None and any("snapshot-count=" in name for name in names):
            continue  # the limit the macro says: a listing without the property read from a column's name
        information = _listing(count, names)
        assert _due(information) == _expected(information), information
        assert _due(relation_information(information)) == _expected(information), information
