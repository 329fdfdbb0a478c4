"""The simulated day, minute by minute: files land, `run` every SOAK_RUN_EVERY minutes (some killed),
`maintain` every SOAK_MAINTAIN_EVERY, the schema change and the erasure at their minutes; then the
warehouse is inspected, checked and reported (soak/__init__.py)."""

from __future__ import annotations

import datetime as dt
import json
import logging
import pickle
import random
import shutil
import signal
import time
from pathlib import Path

from helpers.faults import BRANCH_POINTS, MERGE_POINTS
from soak import checks, report
from soak.commands import Outcome, Processes, Worker, environment, folder_bytes
from soak.producers import SUBJECT, Table, choose_subject, make_tables
from soak.project import add_sources, declare_subject, make_project
from soak.settings import LATE_BY, REDELIVER_LAG, Settings, killed_runs, maintain_minutes, run_minutes

log = logging.getLogger("soak")
MARKER = ".soak-work"  # a work folder the soak made, which it may empty again


def kill_points() -> list[str]:
    """The kill points a batch reaches on the embedded target's one-MERGE path (the soak's tables are
    small): make faults' merge points but those of the branch path and the compaction's."""
    return [point for point in MERGE_POINTS if point not in BRANCH_POINTS and point != "during_compaction"]


def fresh_work(work: Path) -> None:
    if work.exists():
        if not (work / MARKER).exists() and any(work.iterdir()):
            raise SystemExit(f"SOAK_WORK={work} exists and is not a soak's work folder: choose another")
        shutil.rmtree(work)
    work.mkdir(parents=True)
    (work / MARKER).write_text("made by make soak (tests/pytest/soak/): emptied at the next soak\n")


class Day:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.work = settings.work
        self.tables: list[Table] = []
        self.outcomes: list[Outcome] = []
        self.kills: list[checks.Kill] = []
        self.subject: int | None = None
        self.wall = 0.0
        self.erased_at = None
        self.jsonl = self.work / "runs.jsonl"
        self.rng = random.Random(f"{settings.seed}-kills")
        self.points = kill_points()

    def _do(self, command: dict, minute: int, number: int = 0, kill_at: str | None = None, **more) -> Outcome:
        kind = command["kind"]
        label = f"{kind}-{number:03d}" if number else f"{kind}-m{minute:04d}"
        code, wall, seconds, _ = self.commands.do(command, label, kill_at)
        outcome = Outcome(kind, number, minute, wall, seconds, code, kill_at=kill_at, log=f"logs/{label}.log", **more)
        outcome.killed = bool(kill_at) and code == -signal.SIGKILL
        outcome.warehouse_bytes = folder_bytes(self.work / "warehouse")
        self.outcomes.append(outcome)
        report.append(self.jsonl, outcome)
        state = "killed" if outcome.killed else ("ok" if outcome.ok else f"FAILED ({code}): see {outcome.log}")
        log.info("minute %4d: %s %s %.1f s %s", minute, kind, number or "", seconds, state)
        return outcome

    def run(self, minute: int, number: int, kill: bool, files: int) -> None:
        kill_at = None
        if kill:
            kill_at = f"{self.rng.choice(self.points)}:{self.rng.choice(self.tables).model}"
        previous = next((o for o in reversed(self.outcomes) if o.kind == "run"), None)
        recovery = previous is not None and previous.killed
        outcome = self._do({"kind": "run"}, minute, number, kill_at, recovery=recovery, files=files)
        if outcome.killed:
            model = kill_at.split(":", 1)[1]
            self.kills.append(
                checks.Kill(model, kill_at.split(":")[0], checks.utc(outcome.started), checks.utc(time.time()))
            )

    def land(self, minute: int) -> int:
        before = sum(len(t.landed) for t in self.tables)
        last = minute == self.settings.minutes
        for table in self.tables:
            changes = table.full_load() if minute == 0 else table.changes(minute)
            table.land(minute, changes, last_minute=last)
        return sum(len(t.landed) for t in self.tables) - before

    def live(self) -> int:
        s = self.settings
        fresh_work(self.work)
        started = time.monotonic()
        self.tables = make_tables(s)
        self.land(0)
        self.project = make_project(self.work / "project", s.retention_days)
        self.environ = environment(s, self.project)
        self.commands = (Worker if s.mode == "loop" else Processes)(s, self.environ, self.project)
        for line in add_sources(self.project, self.tables, self.environ):
            log.debug("%s", line)
        declare_subject(self.project, self.tables)
        log.info(
            "soak: %d tables added to %s; the day starts (work folder %s; commands: %s)",
            len(self.tables),
            self.project,
            self.work,
            "one long-lived process, started again after a kill" if s.mode == "loop" else "a process each",
        )
        try:
            inspected = self._day(s)
        finally:
            self.commands.close()
        self.wall = time.monotonic() - started
        self.save(self.wall)
        return self.finish(inspected.ok)

    def _day(self, s: Settings) -> Outcome:
        """The day's minutes, then the warehouse dumped for the checks (the inspection's outcome)."""
        runs = run_minutes(s)
        maintains = set(maintain_minutes(s))
        kills = killed_runs(s)
        choose_at = max(1, s.erase_minute - LATE_BY - REDELIVER_LAG)
        pending_files = 0
        for minute in range(1, s.minutes + 1):
            if minute == choose_at:
                self.subject = choose_subject(self.tables)
            if minute == s.schema_change_minute:
                self.tables[0].add_column()
            pending_files += self.land(minute)
            if minute in runs:
                number = runs.index(minute) + 1
                self.run(minute, number, number in kills, pending_files)
                pending_files = 0
            if minute == s.erase_minute:
                command = {"kind": "erase", "subject": SUBJECT, "keys": [str(self.subject)], "reason": "soak"}
                erase = self._do(command, minute)
                self.erased_at = checks.utc(erase.started)
            if minute in maintains:
                self._do({"kind": "maintain"}, minute)
        if self.outcomes and [o for o in self.outcomes if o.kind == "run"][-1].killed:
            self.run(s.minutes, len(runs) + 1, False, 0)
            self._do({"kind": "maintain"}, s.minutes)
        return self._do({"kind": "inspect", "dump": str(self.dumped)}, self.settings.minutes)

    @property
    def dumped(self) -> Path:
        return self.work / "warehouse.pickle"

    def save(self, wall: float) -> None:
        """What the checks need besides the warehouse's dump and runs.jsonl, for `python -m soak check`."""
        state = {
            "wall_seconds": wall,
            "subject": self.subject,
            "erased_at": self.erased_at.isoformat() if self.erased_at else None,
            "kills": [[k.model, k.point, k.started.isoformat(), k.ended.isoformat()] for k in self.kills],
            "landed": {table.name: table.landed for table in self.tables},
        }
        (self.work / "day.json").write_text(json.dumps(state, indent=1), encoding="utf-8")

    def load(self) -> None:
        """A finished day back from its work folder (day.json, runs.jsonl): the checks run again on it."""
        state = json.loads((self.work / "day.json").read_text(encoding="utf-8"))
        self.wall = state["wall_seconds"]
        self.subject = state["subject"]
        self.erased_at = dt.datetime.fromisoformat(state["erased_at"]) if state["erased_at"] else None
        self.kills = [
            checks.Kill(m, p, dt.datetime.fromisoformat(a), dt.datetime.fromisoformat(b))
            for m, p, a, b in state["kills"]
        ]
        self.tables = make_tables(self.settings)
        for table in self.tables:
            table.landed = state["landed"][table.name]
        self.outcomes = []
        for line in self.jsonl.read_text(encoding="utf-8").splitlines():
            self.outcomes.append(Outcome(**json.loads(line)))

    def finish(self, inspected: bool) -> int:
        found: list[checks.Check] = [checks.commands(self.outcomes)]
        times, storage, sums = {}, {}, {}
        if inspected:
            dumped = self.dumped
            with dumped.open("rb") as handle:
                state = pickle.load(handle)
            last_maintain = checks.utc(max(o.started for o in self.outcomes if o.kind == "maintain"))
            found += checks.whole_tables(state, self.tables, self.work, self.subject)
            logged, sums = checks.batch_log(state, self.tables, self.work, self.kills, self.erased_at)
            found += logged
            found += checks.ledger_and_branches(state, self.tables)
            stored, storage = checks.storage(state, self.settings, last_maintain, self.kills)
            found += stored
            found += checks.events(state, self.tables)
        flat, times = checks.run_times(self.outcomes, self.settings)
        found.append(flat)
        report.plot(self.outcomes, self.work / "run_seconds.png")
        text = report.markdown(self.settings, self.outcomes, found, times, storage, sums, self.wall)
        (self.work / "report.md").write_text(text, encoding="utf-8")
        failed = [c for c in found if not c.ok]
        for check in failed:
            log.error("FAIL %s: %s", check.name, check.detail)
        log.info(
            "soak: %d of %d checks passed; report %s", len(found) - len(failed), len(found), self.work / "report.md"
        )
        return 1 if failed else 0
