"""Runs groups of the test suite side by side, each a pytest process of its own (`make test`; docs/tests.md).

    python scripts/test_groups.py NAME=MARKER_EXPRESSION [NAME=MARKER_EXPRESSION ...] [-- PYTEST_ARGS...]

Each group is `pytest -m MARKER_EXPRESSION`, so it pays once for what its tests share (one SparkSession, one
cluster, one S3 server: tests/pytest/conftest.py). Its output goes to target/tests/<NAME>.log and its results to
target/tests/<NAME>.xml (JUnit). While they run, a line every minute says how far each group got; at the end, per
group: its pytest summary, its seconds, and its slowest 25 tests; for a failed group, the short summary of
its failures (the log file has the rest). Exit status 0 only when every group passed.

TEST_GROUPS_PARALLEL=0 runs the groups one after the other (a machine with one core, or to measure each alone).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
OUTPUT = PROJECT / "target" / "tests"
PROGRESS_EVERY = 60.0
# pytest's verbose result words (one per finished test in the log)
RESULT = re.compile(r" (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b")
NO_TESTS = 5  # pytest's exit status when the group selects no test (PYTEST_ARGS narrowed it): not a failure


@dataclass
class Group:
    name: str
    expression: str
    log: Path = field(init=False)
    process: subprocess.Popen | None = None
    started: float = 0.0
    seconds: float = 0.0
    returncode: int | None = None

    def __post_init__(self) -> None:
        self.log = OUTPUT / f"{self.name}.log"

    def start(self, pytest_args: list[str]) -> None:
        command = [
            sys.executable,
            "-m",
            "pytest",
            "tests/pytest",
            "-m",
            self.expression,
            "-v",
            "--durations=25",
            "-p",
            "no:cacheprovider",
            f"--junitxml={OUTPUT / f'{self.name}.xml'}",
            *pytest_args,
        ]
        self.started = time.monotonic()
        with self.log.open("w", encoding="utf-8") as out:
            out.write(f"$ {' '.join(command)}\n")
            out.flush()
            self.process = subprocess.Popen(command, cwd=PROJECT, stdout=out, stderr=subprocess.STDOUT)

    def poll(self) -> bool:
        """True once the group's process has ended."""
        if self.returncode is None and self.process is not None and self.process.poll() is not None:
            self.returncode = self.process.returncode
            self.seconds = time.monotonic() - self.started
        return self.returncode is not None

    @property
    def passed(self) -> bool:
        return self.returncode in (0, NO_TESTS)

    def finished_tests(self) -> int:
        try:
            return len(RESULT.findall(self.log.read_text(encoding="utf-8", errors="replace")))
        except FileNotFoundError:
            return 0

    def sections(self) -> dict[str, list[str]]:
        """The log's `===== title =====` sections, by title (pytest's durations, short summary, result line)."""
        found: dict[str, list[str]] = {}
        current = None
        for line in self.log.read_text(encoding="utf-8", errors="replace").splitlines():
            heading = re.fullmatch(r"=+ (.+?) =+", line)
            if heading:
                current = heading.group(1)
                found[current] = []
            elif current is not None:
                found[current].append(line)
        return found


def parse(argv: list[str]) -> tuple[list[Group], list[str]]:
    if "--" in argv:
        cut = argv.index("--")
        argv, pytest_args = argv[:cut], argv[cut + 1 :]
    else:
        pytest_args = []
    groups = []
    for spec in argv:
        name, sep, expression = spec.partition("=")
        if not sep or not name or not expression:
            raise SystemExit(f"test_groups: '{spec}' is not NAME=MARKER_EXPRESSION")
        groups.append(Group(name, expression))
    if not groups:
        raise SystemExit(__doc__)
    return groups, pytest_args


def report(group: Group) -> None:
    sections = group.sections()
    outcome = next((title for title in reversed(list(sections)) if re.search(r"\bin [\d.]+s\b", title)), "")
    status = "passed" if group.passed else f"FAILED (exit {group.returncode})"
    print(f"\n== {group.name}: {status} in {group.seconds:.0f} s: {outcome or 'no result line'} ({group.log})")
    durations = next((lines for title, lines in sections.items() if title.startswith("slowest")), [])
    for line in durations[:25]:
        print(f"   {line}")
    if not group.passed:
        summary = sections.get("short test summary info", [])
        for line in summary[:60] or group.log.read_text(encoding="utf-8", errors="replace").splitlines()[-80:]:
            print(f"   {line}")


def main(argv: list[str]) -> int:
    groups, pytest_args = parse(argv)
    OUTPUT.mkdir(parents=True, exist_ok=True)
    parallel = os.environ.get("TEST_GROUPS_PARALLEL", "1") != "0"
    started = time.monotonic()
    names = ", ".join(f"{g.name} (-m '{g.expression}')" for g in groups)
    print(f"tests: {len(groups)} group(s) {'side by side' if parallel else 'one after the other'}: {names}")
    print(f"tests: output in {OUTPUT}/<group>.log", flush=True)
    pending = list(groups)
    running: list[Group] = []
    last_progress = time.monotonic()
    try:
        while pending or running:
            if pending and (parallel or not running):
                group = pending.pop(0)
                group.start(pytest_args)
                running.append(group)
                continue
            time.sleep(2)
            for group in [g for g in running if g.poll()]:
                running.remove(group)
                word = "passed" if group.passed else "FAILED"
                print(f"tests: {group.name} {word} after {group.seconds:.0f} s", flush=True)
            if time.monotonic() - last_progress >= PROGRESS_EVERY and running:
                last_progress = time.monotonic()
                done = ", ".join(f"{g.name} {g.finished_tests()} done" for g in running)
                print(f"tests: {time.monotonic() - started:.0f} s: {done}", flush=True)
    finally:
        for group in running:  # interrupted: no pytest left behind (their fixtures stop their servers)
            if group.process is not None and group.process.poll() is None:
                group.process.terminate()
                try:
                    group.process.wait(timeout=120)
                except subprocess.TimeoutExpired:
                    group.process.kill()
    for group in groups:
        report(group)
    failed = [g.name for g in groups if not g.passed]
    total = time.monotonic() - started
    print(
        f"\ntests: {len(groups) - len(failed)} of {len(groups)} group(s) passed in {total:.0f} s"
        + (f"; failed: {', '.join(failed)}" if failed else "")
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
