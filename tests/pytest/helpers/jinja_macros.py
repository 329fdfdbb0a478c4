"""Pure macros of the project called from Python, rendered with Jinja as dbt renders them: dbt's `return(x)`
stubbed as an exception that carries x (tests/pytest/unit/test_write_path_choice.py, test_table_versions.py)."""

from __future__ import annotations


class Returned(Exception):
    """dbt's return(x): ends the macro with the value x."""

    def __init__(self, value):
        super().__init__(value)
        self.value = value


def dbt_return(value):
    raise Returned(value)


def call(macro, *args):
    """What the macro returned (dbt's return(x)); a macro that returns nothing fails the test."""
    try:
        macro(*args)
    except Returned as returned:
        return returned.value
    raise AssertionError(f"{macro} returned nothing")
