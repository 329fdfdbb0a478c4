"""Which write path and which MERGE plan a batch takes (macros/cdc/merge.sql: cdc_write_path,
cdc_merge_shuffles): pure macros over the table's state, rendered with Jinja as dbt renders them, the
settings they read stubbed. The paths themselves run in tests/pytest/test_write_paths.py."""

from __future__ import annotations

import functools
import random
from pathlib import Path

import jinja2
import pytest

from helpers.jinja_macros import call as _call
from helpers.jinja_macros import dbt_return as _return

MACROS = Path(__file__).resolve().parents[3] / "macros" / "cdc"
MIB = 1024 * 1024


@functools.cache
def _template() -> jinja2.Template:
    environment = jinja2.Environment(extensions=["jinja2.ext.do"])
    return environment.from_string((MACROS / "merge.sql").read_text(encoding="utf-8"))


def _merge_macros(one_merge_max_bytes, broadcast_max_bytes):
    return _template().make_module(
        {
            "return": _return,
            "cdc_one_merge_max_bytes": lambda: one_merge_max_bytes,
            "cdc_merge_broadcast_max_bytes": lambda: broadcast_max_bytes,
        }
    )


def _expected(state, one_merge_max_bytes, broadcast_max_bytes) -> tuple[str, bool]:
    """The rule in words: a table that exists with a snapshot takes one MERGE unless a limit is set and
    its files are above it; the MERGE shuffles (bloom filter) when its files are above the broadcast limit."""
    exists = state is not None and state["snapshot"] is not None
    within = one_merge_max_bytes is None or (exists and state["bytes"] <= one_merge_max_bytes)
    path = "merge" if exists and within else "split"
    return path, state is not None and state["bytes"] > broadcast_max_bytes


@pytest.mark.parametrize("seed", range(5))
def test_every_table_that_exists_takes_one_merge_and_a_large_ones_is_shuffled(seed):
    chooser = random.Random(seed)
    for _ in range(50):
        one_merge_max_bytes = chooser.choice([None, None, 0, 32 * MIB, chooser.randrange(0, 64 * MIB)])
        broadcast_max_bytes = chooser.choice([0, 32 * MIB, chooser.randrange(0, 64 * MIB)])
        state = chooser.choice(
            [
                None,  # a table created empty in this run
                {"snapshot": None, "bytes": 0},  # created, never written
                {"snapshot": chooser.randrange(1, 10**18), "bytes": chooser.choice([0, 32 * MIB, 32 * MIB + 1])},
                {"snapshot": chooser.randrange(1, 10**18), "bytes": chooser.randrange(0, 10**11)},
            ]
        )
        macros = _merge_macros(one_merge_max_bytes, broadcast_max_bytes)
        said = (_call(macros.cdc_write_path, state), _call(macros.cdc_merge_shuffles, state))
        wanted = _expected(state, one_merge_max_bytes, broadcast_max_bytes)
        assert said == wanted, f"state {state}, limits {one_merge_max_bytes}, {broadcast_max_bytes}: {said}"


def test_by_default_a_table_of_any_size_takes_one_merge():
    macros = _merge_macros(None, 32 * MIB)
    for size in (0, 32 * MIB, 32 * MIB + 1, 10**12):
        assert _call(macros.cdc_write_path, {"snapshot": 7, "bytes": size}) == "merge"
    assert _call(macros.cdc_merge_shuffles, {"snapshot": 7, "bytes": 32 * MIB}) is False
    assert _call(macros.cdc_merge_shuffles, {"snapshot": 7, "bytes": 32 * MIB + 1}) is True
