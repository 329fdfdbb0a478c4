"""The Python side of a run against damaged raw files, fuzzed with hypothesis (no Spark): for every file
damaged the ways storage and producers damage them (tests/pytest/fuzz/damage.py), the listing, the
empty-file check and the footers either take the folder or refuse it, with exactly one line per bad file
that names the file and the table and says in words what is wrong; never an exception of their own.

`make test` tries FUZZ_EXAMPLES cases (default 300: seconds); `make fuzz` many more (FUZZ_EXAMPLES=20000).
The cases that once failed are pinned below with @example."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fuzz.damage import ACCEPTED_KINDS, KINDS, damage
from fuzz.python_side import SOURCES, assert_worded, damaged_file, land, sample_files, verdict

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "300"))


def run_case(source: str, kind: str, seed: int) -> tuple[list[str], object]:
    good = sample_files()[source][3][damaged_file(source)]
    name = Path(damaged_file(source)).name
    damaged = damage(good, name, kind, seed, SOURCES[source].keys)
    landing = Path(tempfile.mkdtemp(prefix="fuzz-case-"))
    try:
        land(landing, source, (1, 2, 3), damaged.files)
        return verdict(landing, source), damaged
    finally:
        shutil.rmtree(landing, ignore_errors=True)


def check(source: str, kind: str, seed: int) -> None:
    problems, damaged = run_case(source, kind, seed)
    if os.environ.get("FUZZ_REPORT"):  # make fuzz: one JSON line per case, for the run's figures (fuzz.figures)
        with open(os.environ["FUZZ_REPORT"], "a", encoding="utf-8") as out:
            out.write(json.dumps({"source": source, "kind": kind, "seed": seed, "refused": bool(problems)}) + "\n")
    label = f"{source} {kind} seed {seed} ({damaged.says})"
    name = Path(damaged_file(source)).name
    if kind in ACCEPTED_KINDS:
        assert problems == [], f"{label}: must be taken, was refused: {problems}"
        return
    for line in problems:
        assert_worded(line, name, SOURCES[source].model, label)
    assert len(problems) <= 1, f"{label}: one line per bad file, got {len(problems)}: {problems}"


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=os.environ.get("FUZZ_RANDOM") is None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(source=st.sampled_from(sorted(SOURCES)), kind=st.sampled_from(KINDS), seed=st.integers(0, 2**32 - 1))
@example(source="dms_customer_address", kind="repeated_column", seed=0)  # [COLUMN_ALREADY_EXISTS] from Spark before
@example(source="dms_customer_address", kind="zero_bytes", seed=0)  # two lines for one file before
def test_python_side_takes_or_refuses_in_words(source, kind, seed):
    check(source, kind, seed)


@pytest.mark.parametrize("source", sorted(SOURCES))
@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_on_every_source(source, kind):
    """Each kind once per source (seed 0): the seed corpus of the hypothesis run, always tried."""
    check(source, kind, 0)
