"""Stateful fuzzing of run sequences (issue 43, part 3; the machine and its invariants: fuzz/sequences.py):
land valid and damaged files, remove and replace them, add a column, run, in any order; after every run the
table equals the replay of the accepted files, its columns are theirs, and the ledger, the batch log and the
run's lines agree.

Runs cost seconds: `make test` tries a few short sequences, the same every time (derandomized); `make fuzz`
searches FUZZ_SEQUENCES fresh ones (marker fuzz_full) and reports its figures (FUZZ_REPORT, fuzz.figures).
Failing sequences the search shrank are pinned in test_run_sequences.py as plain tests."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

from fuzz.sequences import Context, RunSequences

SEARCH = int(os.environ.get("FUZZ_SEQUENCES", "25"))

# make test runs this module in its servers process (Makefile: SERVERS_GROUP).
pytestmark = pytest.mark.fuzz


def _search(dbt, spark, tmp_path, caplog, label: str, **options) -> None:
    context = Context(dbt, spark, tmp_path, caplog)
    try:
        run_state_machine_as_test(
            lambda: RunSequences(context),
            settings=settings(deadline=None, suppress_health_check=list(HealthCheck), **options),
        )
    except BaseException:
        context.stats.failures += 1
        raise
    finally:
        print(context.stats.line())
        context.stats.report(label)


def test_short_run_sequences_keep_the_invariants(dbt, spark, tmp_path, caplog):
    """`make test`: three sequences of at most six steps, the same every run."""
    _search(
        dbt, spark, tmp_path, caplog, "smoke", max_examples=3, stateful_step_count=6, derandomize=True, database=None
    )


@pytest.mark.fuzz_full
def test_run_sequences_search(dbt, spark, tmp_path, caplog):
    """`make fuzz`: FUZZ_SEQUENCES fresh sequences of at most ten steps."""
    _search(dbt, spark, tmp_path, caplog, "search", max_examples=SEARCH, stateful_step_count=10)


def test_a_scripted_sequence_keeps_the_invariants(dbt, spark, tmp_path, caplog):
    """Every step once, in an order the first short sequences do not reach: a first run refused (a file
    without its key column), the file replaced by a valid one, a column added, all applied; an applied file
    removed and an empty one landed (refused); that one removed (nothing new)."""
    machine = RunSequences(Context(dbt, spark, tmp_path, caplog))
    machine.land_damaged(changes=[("I", 5, 0, 10), ("U", 1, 1, 20)], slot=0, kind="missing_key", seed=0)
    machine.land_valid(changes=[("U", 2, 1, 5), ("D", 3, 0, 30)], slot=0)
    machine.run()
    machine.replace(pick=0, changes=[("I", 5, 2, 10), ("D", 1, 0, 25)], kind=None, seed=0)
    machine.add_column()
    machine.land_valid(changes=[("U", 2, 3, 1), ("I", 6, 1, 40)], slot=0)
    machine.run()
    machine.remove(pick=0)
    machine.land_damaged(changes=[("U", 4, 1, 50)], slot=0, kind="zero_bytes", seed=0)
    machine.run()
    machine.remove(pick=2)
    machine.run()
    machine.teardown()


def test_a_scripted_erasure_keeps_the_invariants(dbt, spark, tmp_path, caplog):
    """An erasure between runs: a customer of an applied file and of a file waiting is erased; the next run
    applies the waiting file without them and a late change of theirs; a file holding only their change follows."""
    machine = RunSequences(Context(dbt, spark, tmp_path, caplog))
    machine.land_valid(changes=[("U", 2, 1, 5), ("I", 5, 0, 30)], slot=0)
    machine.run()
    machine.land_valid(changes=[("U", 2, 2, 40), ("U", 3, 1, 45)], slot=0)
    machine.erase(key=2)
    machine.land_valid(changes=[("U", 2, 3, 60), ("D", 4, 0, 70)], slot=0)
    machine.run()
    machine.land_valid(changes=[("U", 2, 0, 80)], slot=0)
    machine.run()
    machine.teardown()


def test_a_flipped_dictionary_page_of_text_is_refused_before_the_run(dbt, spark, tmp_path, caplog):
    """Found by `make fuzz` (2026-12-03): a flipped dictionary page left text bytes that are not UTF-8; pyarrow
    decoded the page without a word, the file was applied, and its rows could not be read back as text. The
    hooks now refuse it (evolution/footers.py: read_pages), and the table stays the replay of the accepted files."""
    machine = RunSequences(Context(dbt, spark, tmp_path, caplog))
    machine.add_column()
    machine.replace(pick=7, changes=[("I", 6, 3, 223), ("U", 6, 3, 194)], kind="arrow_schema_metadata", seed=3)
    machine.land_damaged(
        changes=[("I", 1, 2, 240), ("U", 4, 1, 199), ("U", 1, 0, 206), ("I", 4, 1, 41)],
        kind="flip_dictionary_page",
        seed=20,
        slot=3,
    )
    machine.run()
    machine.teardown()


def test_a_batch_refused_by_its_validation_adds_no_column(dbt, spark, tmp_path, caplog):
    """A file with a new column whose `Op` pages were flipped into unknown operations (found by `make fuzz`,
    2026-12-03): the hooks evolved the table, then the batch's validation (cdc_validate_batch) refused the batch
    and the column stayed. The hooks now count those events before they evolve anything (landing/validation.py)."""
    machine = RunSequences(Context(dbt, spark, tmp_path, caplog))
    machine.replace(pick=2, changes=[("I", 6, 0, 0)], kind=None, seed=1)
    machine.run()
    machine.erase(key=1)
    machine.remove(pick=10)
    machine.add_column()
    machine.run()
    machine.land_damaged(changes=[("I", 6, 0, 5)], kind="flip_data_page", seed=2, slot=2)
    machine.add_column()
    machine.run()
    machine.teardown()


def test_a_flipped_change_sequence_with_a_new_column_adds_no_column(dbt, spark, tmp_path, caplog):
    """Found by `make fuzz` (2026-12-03, at a69564d): a file whose AR_H_CHANGE_SEQ dictionary page was flipped,
    waiting with a valid file that brings new columns; the batch was refused and the columns stayed."""
    machine = RunSequences(Context(dbt, spark, tmp_path, caplog))
    machine.add_column()
    machine.run()
    machine.land_damaged(
        changes=[("I", 2, 3, 27), ("D", 1, 3, 61), ("U", 2, 3, 113)], kind="flip_dictionary_page", seed=3, slot=3
    )
    machine.add_column()
    machine.land_valid(changes=[("I", 4, 2, 15), ("U", 1, 1, 157), ("U", 5, 0, 195), ("I", 6, 2, 240)], slot=0)
    machine.run()
    machine.teardown()


def test_a_column_a_taken_file_made_nested_refuses_the_plain_files_after_it(dbt, spark, tmp_path, caplog):
    """Found by `make fuzz` (2026-12-05): the full load replaced by a file whose row_audit_ts is a struct of a
    timestamp; the first build takes it (nothing earlier to conflict with), and the table's column is that
    struct, compared as the dict of its fields. A later valid file, its row_audit_ts a plain timestamp, is then
    refused in words ("neither type widens to the other"), the table unchanged; removed, the next run is clean."""
    machine = RunSequences(Context(dbt, spark, tmp_path, caplog))
    machine.replace(pick=0, changes=[("U", 1, 1, 5), ("I", 5, 0, 9)], kind="nested_type", seed=4)
    machine.run()
    machine.land_valid(changes=[("U", 2, 1, 30)], slot=0)
    machine.run()
    machine.remove(pick=0)
    machine.run()
    machine.teardown()
