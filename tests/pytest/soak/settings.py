"""The soak's knobs (environment variables, the issue's values as defaults) and its timetable: pure,
no Spark, no files (tests/pytest/unit/test_soak_plan.py)."""

from __future__ import annotations

import os
import random
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from helpers.paths import PROJECT

# Late and re-delivered files: a table's file of minute m is held back LATE_BY minutes (it lands after
# files named after it); at a re-delivery minute the file of REDELIVER_LAG minutes before lands again.
LATE_EVERY, LATE_BY = 17, 3
REDELIVER_EVERY, REDELIVER_LAG = 23, 2


@dataclass(frozen=True)
class Settings:
    tables: int = 20
    minutes: int = 1440
    run_every: int = 5
    maintain_every: int = 60
    kill_rate: float = 0.01
    seed: int = 29
    kill_runs: tuple[int, ...] | None = None  # explicit run numbers (1-based); None: kill_rate of them
    work: Path = PROJECT / "target" / "soak"
    rows: int = 200  # full-load rows per table
    changes: int = 6  # change events per table per simulated minute
    schema_change_at: int | None = None  # minute; default 40 % of the day
    erase_at: int | None = None  # minute (after that minute's run); default the run minute nearest 60 %
    retention_days: float = 0.0  # the copy's cdc_retention.days (the day is accelerated: see __init__)
    flat_factor: float = 1.5  # last hour's median run time may be at most this times the first hour's
    run_timeout: int = 1800  # seconds before a hung command's process group is killed
    mode: str = "loop"  # loop: one long-lived process for the day's commands; processes: one each (soak/commands.py)

    @property
    def schema_change_minute(self) -> int:
        return self.schema_change_at if self.schema_change_at is not None else max(1, round(self.minutes * 0.4))

    @property
    def erase_minute(self) -> int:
        if self.erase_at is not None:
            return self.erase_at
        wanted = self.minutes * 0.6
        return min(run_minutes(self), key=lambda m: (abs(m - wanted), m))


def _int(environ: Mapping[str, str], name: str, default: int) -> int:
    value = environ.get(name, "").strip()
    return int(value) if value else default


def from_env(environ: Mapping[str, str] = os.environ) -> Settings:
    """Settings from SOAK_* variables; unset ones keep the issue's values."""
    kills = environ.get("SOAK_KILL_RUNS", "").replace(",", " ").split()
    optional = {name: environ.get(f"SOAK_{name.upper()}", "").strip() for name in ("schema_change_at", "erase_at")}
    settings = Settings(
        tables=_int(environ, "SOAK_TABLES", 20),
        minutes=_int(environ, "SOAK_MINUTES", 1440),
        run_every=_int(environ, "SOAK_RUN_EVERY", 5),
        maintain_every=_int(environ, "SOAK_MAINTAIN_EVERY", 60),
        kill_rate=float(environ.get("SOAK_KILL_RATE") or 0.01),
        seed=_int(environ, "SOAK_SEED", 29),
        kill_runs=tuple(int(k) for k in kills) if kills else None,
        work=Path(environ.get("SOAK_WORK") or PROJECT / "target" / "soak").resolve(),
        rows=_int(environ, "SOAK_ROWS", 200),
        changes=_int(environ, "SOAK_CHANGES", 6),
        schema_change_at=int(optional["schema_change_at"]) if optional["schema_change_at"] else None,
        erase_at=int(optional["erase_at"]) if optional["erase_at"] else None,
        retention_days=float(environ.get("SOAK_RETENTION_DAYS") or 0.0),
        flat_factor=float(environ.get("SOAK_FLAT_FACTOR") or 1.5),
        run_timeout=_int(environ, "SOAK_RUN_TIMEOUT", 1800),
        mode=(environ.get("SOAK_MODE") or "loop").strip(),
    )
    check(settings)
    return settings


def check(settings: Settings) -> None:
    """ValueError, in one line, for settings the soak cannot run."""
    if settings.mode not in ("loop", "processes"):
        raise ValueError(f"SOAK_MODE must be loop or processes, not {settings.mode!r}")
    if settings.tables < 2:
        raise ValueError("SOAK_TABLES must be at least 2 (one DMS and one Debezium table hold the erased subject)")
    if settings.run_every < 1 or settings.maintain_every < 1 or settings.minutes < settings.run_every:
        raise ValueError("SOAK_MINUTES must be at least SOAK_RUN_EVERY, and both every-values at least 1")
    if settings.changes < 1 or settings.rows < 10:
        raise ValueError("SOAK_CHANGES must be at least 1 and SOAK_ROWS at least 10")
    runs = len(run_minutes(settings))
    for run in settings.kill_runs or ():
        if not 1 <= run <= runs:
            raise ValueError(f"SOAK_KILL_RUNS: run {run} is not one of the day's {runs} runs")
    if not 0 < settings.schema_change_minute <= settings.minutes:
        raise ValueError(f"SOAK_SCHEMA_CHANGE_AT must be a minute of the day (1..{settings.minutes})")
    if settings.erase_minute not in run_minutes(settings):
        raise ValueError("SOAK_ERASE_AT must be a run minute (a multiple of SOAK_RUN_EVERY)")


def run_minutes(settings: Settings) -> list[int]:
    """The minutes a run starts at: every run_every minutes, and the day's last minute."""
    minutes = list(range(settings.run_every, settings.minutes + 1, settings.run_every))
    if minutes[-1] != settings.minutes:
        minutes.append(settings.minutes)
    return minutes


def maintain_minutes(settings: Settings) -> list[int]:
    """The minutes `maintain` runs at (after that minute's run): every maintain_every, and the last."""
    minutes = list(range(settings.maintain_every, settings.minutes + 1, settings.maintain_every))
    if not minutes or minutes[-1] != settings.minutes:
        minutes.append(settings.minutes)
    return minutes


def killed_runs(settings: Settings) -> set[int]:
    """The run numbers (1-based) killed: SOAK_KILL_RUNS, else round(kill_rate x runs) of them (at least one
    when the rate is above 0), drawn with the seed among every run but the first (it creates the tables)
    and the last (the day ends on a run that finishes)."""
    runs = len(run_minutes(settings))
    if settings.kill_runs is not None:
        return set(settings.kill_runs)
    if settings.kill_rate <= 0 or runs < 3:
        return set()
    count = min(runs - 2, max(1, round(settings.kill_rate * runs)))
    return set(random.Random(settings.seed).sample(range(2, runs), count))


def late_minute(table_index: int, minute: int) -> bool:
    """A table's file of this minute is held back LATE_BY minutes."""
    return minute > 0 and (minute + 5 * table_index) % LATE_EVERY == 3


def redelivery_minute(table_index: int, minute: int) -> bool:
    """A table's file of REDELIVER_LAG minutes ago lands again at this minute."""
    return minute > REDELIVER_LAG + LATE_BY and (minute + 7 * table_index) % REDELIVER_EVERY == 5


def flat(first: list[float], last: list[float], factor: float) -> tuple[float, float, bool]:
    """(median of first, median of last, last <= factor x first): run time does not grow with history."""
    if not first or not last:
        return 0.0, 0.0, False
    a, b = median(first), median(last)
    return a, b, b <= factor * a


def median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def compared(minutes: list[int], settings: Settings) -> tuple[list[int], list[int]]:
    """The runs (by minute) compared for flatness, out of the runs that count (finished, not the first, not a
    recovery): the first and the last hour's worth (60 / run_every of them), or a third each of a shorter day."""
    count = max(1, min(60 // settings.run_every, len(minutes) // 3))
    ordered = sorted(minutes)
    return ordered[:count], ordered[-count:]
