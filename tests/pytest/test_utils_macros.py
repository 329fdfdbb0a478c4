"""The project's dbt_utils-like generic tests (macros/utils/), each on rows whose failures are known.

dbt compiles each test's SQL from the macro exactly as `dbt test` would (one `dbt compile --inline`
for all cases), and Spark runs it over a small inline relation: the rows a test returns are its
failures, compared whole with the rows the case expects."""

from __future__ import annotations

import json

import pytest

# An inline relation per case, as `model` would render it in `from {{ model }}`.
AMOUNTS = "(select * from values (1, 5), (2, -1), (3, null), (4, 0) as t(id, amount)) as amounts"
PAIRS = "(select * from values (1, 'a'), (1, 'b'), (1, 'a'), (2, null), (2, null), (3, 'c') as t(k1, k2)) as pairs"
UNIQUE_PAIRS = "(select * from values (1, 'a'), (1, 'b'), (2, 'a') as t(k1, k2)) as pairs"
VALUES = "(select * from values (1, 0), (2, 5), (3, 10), (4, -1), (5, 11), (6, null) as t(id, v)) as vals"

# case: (macro call, expected failing rows as sorted tuples)
CASES: dict[str, tuple[str, list[tuple]]] = {
    "expression_is_true: false fails, null passes": (
        f"test_expression_is_true(model={AMOUNTS!r}, expression='amount >= 0')",
        [(2, -1)],
    ),
    "expression_is_true: appended to the column": (
        f"test_expression_is_true(model={AMOUNTS!r}, column_name='amount', expression='> 0')",
        [(2, -1), (4, 0)],
    ),
    "unique_combination_of_columns: one row per duplicated combination, nulls group": (
        f"test_unique_combination_of_columns(model={PAIRS!r}, combination_of_columns=['k1', 'k2'])",
        [(1, "a", 2), (2, None, 2)],
    ),
    "unique_combination_of_columns: a unique grain passes": (
        f"test_unique_combination_of_columns(model={UNIQUE_PAIRS!r}, combination_of_columns=['k1', 'k2'])",
        [],
    ),
    "unique_combination_of_columns: quoted columns": (
        f"test_unique_combination_of_columns(model={PAIRS!r}, combination_of_columns=['k1'], quote_columns=true)",
        [(1, 3), (2, 2)],
    ),
    "accepted_range: inclusive bounds, null passes": (
        f"test_accepted_range(model={VALUES!r}, column_name='v', min_value=0, max_value=10)",
        [(4, -1), (5, 11)],
    ),
    "accepted_range: exclusive bounds": (
        f"test_accepted_range(model={VALUES!r}, column_name='v', min_value=0, max_value=10, inclusive=false)",
        [(1, 0), (3, 10), (4, -1), (5, 11)],
    ),
    "accepted_range: one bound": (
        f"test_accepted_range(model={VALUES!r}, column_name='v', max_value=5)",
        [(3, 10), (5, 11)],
    ),
}


@pytest.fixture(scope="module")
def compiled(dbt, spark, tmp_path_factory) -> dict[str, str]:
    """Each case's test SQL, compiled by dbt from the project's macros in one invocation."""
    calls = ", ".join(f"{json.dumps(case)}: {call}" for case, (call, _) in CASES.items())
    result = dbt(
        "compile",
        "--inline",
        "{{ tojson({" + calls + "}) }}",
        landing=tmp_path_factory.mktemp("utils_landing"),
        schema="utils_macros",
    )
    assert result.success, result.exception
    return json.loads(result.result.results[0].node.compiled_code)


@pytest.mark.parametrize("case", CASES)
def test_generic_test_returns_exactly_the_failing_rows(compiled, spark, case):
    _, expected = CASES[case]
    rows = sorted((tuple(row) for row in spark.sql(compiled[case]).collect()), key=repr)
    assert rows == sorted(expected, key=repr), compiled[case]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (f"test_accepted_range(model={VALUES!r}, column_name='v')", "give min_value, max_value or both"),
        (f"test_unique_combination_of_columns(model={PAIRS!r}, combination_of_columns='k1')", "must be a list"),
    ],
)
def test_generic_test_refuses_bad_arguments(dbt, spark, tmp_path, capsys, call, message):
    result = dbt("compile", "--inline", "{{ " + call + " }}", landing=tmp_path, schema="utils_macros")
    assert not result.success
    assert message in capsys.readouterr().out


def test_dbt_show_of_extreme_timestamps(dbt, spark, schema, tmp_path):
    """`dbt show` of 0001-01-01 and 9999-12-31 (issue 41): pyspark's collect cannot make a Python datetime
    of the first day of year 1 ('year 0 is out of range'), so the project's get_show_sql (macros/spark/
    show.sql) shows timestamp columns as their text; other columns as they are."""
    query = (
        "select timestamp'0001-01-01 00:00:00' as earliest, timestamp'9999-12-31 23:59:59.999999' as latest,"
        " 'text' as label"
    )
    result = dbt("show", "--inline", query, landing=tmp_path, schema=schema)
    assert result.success, result.exception
    (shown,) = result.result.results
    assert [[str(value) for value in row] for row in shown.agate_table.rows] == [
        ["0001-01-01 00:00:00", "9999-12-31 23:59:59.999999", "text"]
    ]
