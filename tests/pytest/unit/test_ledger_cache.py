"""The hooks' ledger cache follows the run's own INSERT into the ledger (landing/pending.py: note_recorded;
commands/accounting.py: ledger_files), so a run after a run that applied files reads one row of metadata,
not the ledger (issue 42: a run with nothing new, at most 3 statements)."""

from __future__ import annotations

import json

from python_hooks.commands.accounting import ledger_files
from python_hooks.landing.pending import LEDGER_CACHE, _cached_ledger, _keep_ledger, ledger_cached, note_recorded

LEDGER = "`s_cdc_meta`.`cdc_file_ledger`"


def test_the_cache_moves_to_the_insert_s_snapshot_with_the_files_added(tmp_path) -> None:
    _keep_ledger(tmp_path, LEDGER, "100", {"a": {"f1"}, "b": set()})
    assert ledger_cached(tmp_path, LEDGER) and not ledger_cached(tmp_path, "`other`.`cdc_file_ledger`")
    assert note_recorded(tmp_path, LEDGER, "100", "200", {"a": ["f2"], "b": ["g1", "g2"], "c": ["h1"]})
    assert _cached_ledger(tmp_path, LEDGER, "100") is None  # the snapshot before is no longer the cache's
    # a model the cache did not hold stays out: the next run reads the ledger for it
    assert _cached_ledger(tmp_path, LEDGER, "200") == {"a": {"f1", "f2"}, "b": {"g1", "g2"}}


def test_an_insert_whose_parent_is_not_the_cache_s_snapshot_leaves_it(tmp_path) -> None:
    """Another commit came between (a reset's delete, another writer): the cache is not carried forward."""
    _keep_ledger(tmp_path, LEDGER, "100", {"a": {"f1"}})
    before = (tmp_path / LEDGER_CACHE).read_text(encoding="utf-8")
    assert not note_recorded(tmp_path, LEDGER, "150", "200", {"a": ["f2"]})
    assert (tmp_path / LEDGER_CACHE).read_text(encoding="utf-8") == before
    assert not note_recorded(tmp_path / "none", LEDGER, "100", "200", {"a": ["f2"]})  # no cache: nothing


def test_a_damaged_cache_is_no_cache(tmp_path) -> None:
    (tmp_path / LEDGER_CACHE).write_text("{not json", encoding="utf-8")
    assert not ledger_cached(tmp_path, LEDGER)
    assert not note_recorded(tmp_path, LEDGER, "100", "200", {"a": ["f2"]})
    (tmp_path / LEDGER_CACHE).write_text(json.dumps({"relation": LEDGER}), encoding="utf-8")
    assert _cached_ledger(tmp_path, LEDGER, "100") is None


def test_the_files_a_run_adds_to_the_ledger_come_from_its_records() -> None:
    rows = [["'a'", "'f1'"]]  # a ledger row's literals (macros/cdc/batch_log.sql: cdc_ledger_rows)
    records = [
        {"model": "a", "ledger": rows, "ledger_files": ["f1", "f2"]},
        {"model": "b", "batch_log": ["'b'"], "ledger": None},  # refused: no ledger rows
    ]
    assert ledger_files(records) == {"a": ["f1", "f2"]}
    assert ledger_files([*records, {"model": "c", "ledger": rows, "reset": True, "ledger_files": []}]) is None
    assert ledger_files([{"model": "a", "ledger": rows}]) is None  # a record that does not say
