"""The figures of a `make fuzz` run (docs/operations.md): cases tried and refused per kind, from the JSON
lines the fuzz tests write with FUZZ_REPORT; with a third report, the sequences of runs (fuzz/sequences.py).

    PYTHONPATH=tests/pytest python -m fuzz.figures data/fuzz-python.jsonl data/fuzz-spark.jsonl \
      [data/fuzz-sequences.jsonl]"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path


def sequences(report: Path) -> list[str]:
    """One line per search of run sequences (make test's short ones and make fuzz's search)."""
    if not report.exists():
        return []
    lines = []
    for search in (json.loads(line) for line in report.read_text(encoding="utf-8").splitlines()):
        kinds = ", ".join(f"{kind} {n}" for kind, n in sorted(search["kinds"].items())) or "none"
        lines.append(
            f"Run sequences ({search['search']}): {search['sequences']} sequences, {search['steps']} steps,"
            f" {search['runs']} runs ({search['applied']} applied, {search['refused']} refused, {search['idle']}"
            f" with nothing new), {search['damaged_landed']} damaged files landed ({search['damaged_taken']} taken;"
            f" {kinds}), {search['failures']} failing"
        )
    return lines


def figures(python_side: Path, spark: Path) -> list[str]:
    fast = [json.loads(line) for line in python_side.read_text(encoding="utf-8").splitlines()]
    slow = [json.loads(line) for line in spark.read_text(encoding="utf-8").splitlines()] if spark.exists() else []
    tried, refused = Counter(c["kind"] for c in fast), Counter(c["kind"] for c in fast if c["refused"])
    in_spark = Counter(c["kind"] for c in slow)
    refused_spark = Counter(c["kind"] for c in slow if not c["taken"])
    lines = [
        f"Python side: {len(fast)} cases, {len(tried)} kinds, {sum(refused.values())} refused;"
        f" Spark: {len(slow)} cases, {sum(refused_spark.values())} refused, {sum(c['seconds'] for c in slow):.0f} s",
        "| kind | Python side: cases | refused | Spark: cases | refused |",
        "|---|---|---|---|---|",
    ]
    for kind in sorted(tried):
        lines.append(f"| {kind} | {tried[kind]} | {refused[kind]} | {in_spark[kind]} | {refused_spark[kind]} |")
    return lines


if __name__ == "__main__":
    runs = sequences(Path(sys.argv[3])) if len(sys.argv) > 3 else []
    print("\n".join(figures(Path(sys.argv[1]), Path(sys.argv[2])) + runs))
