"""The day's report in the work folder: `runs.jsonl` (a line per command, written as the day goes),
`run_seconds.png` (seconds per run and per maintenance over the simulated day, warehouse bytes below) and
`report.md` (the day's figures, which docs/performance.md points to, then every check)."""

from __future__ import annotations

import json
from pathlib import Path

from soak.checks import Check
from soak.commands import Outcome
from soak.settings import Settings, median


def append(path: Path, outcome: Outcome) -> None:
    with path.open("a", encoding="utf-8") as out:
        out.write(json.dumps(outcome.record()) + "\n")


def plot(outcomes: list[Outcome], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = [o for o in outcomes if o.kind == "run"]
    maintains = [o for o in outcomes if o.kind == "maintain"]
    figure, (top, bottom) = plt.subplots(2, 1, figsize=(10, 6.5), sharex=True, height_ratios=[3, 1.3])
    normal = [o for o in runs if not o.killed and not o.recovery]
    top.plot([o.minute for o in normal], [o.seconds for o in normal], ".", label="make run")
    recovered = [o for o in runs if o.recovery]
    top.plot([o.minute for o in recovered], [o.seconds for o in recovered], "s", label="run after a kill")
    killed = [o for o in runs if o.killed]
    top.plot([o.minute for o in killed], [o.seconds for o in killed], "x", color="red", label="killed (SIGKILL)")
    top.plot([o.minute for o in maintains], [o.seconds for o in maintains], "^", label="make maintain")
    top.set_ylabel("seconds")
    top.set_ylim(bottom=0)
    top.legend(loc="lower right", fontsize="small")
    top.set_title("make soak: seconds per command over the simulated day")
    done = [o for o in outcomes if o.warehouse_bytes]
    bottom.plot([o.minute for o in done], [o.warehouse_bytes / 2**20 for o in done], "-")
    bottom.set_ylabel("warehouse MiB")
    bottom.set_xlabel("simulated minute")
    bottom.set_ylim(bottom=0)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def _most(figures: dict, name: str) -> int:
    return max((f[name] for f in figures.values()), default=0)


def _total(figures: dict, name: str) -> int:
    return sum(f[name] for f in figures.values())


def markdown(
    settings: Settings,
    outcomes: list[Outcome],
    checks: list[Check],
    times: dict,
    storage: dict,
    sums: dict,
    wall_seconds: float,
) -> str:
    runs = [o for o in outcomes if o.kind == "run"]
    killed = [o for o in runs if o.killed]
    recoveries = [o for o in runs if o.recovery]
    maintains = [o for o in outcomes if o.kind == "maintain"]
    erase = [o for o in outcomes if o.kind == "erase"]
    current = {name: f for name, f in storage.items() if "_current." in name}
    meta = {name: f for name, f in storage.items() if "_cdc_meta." in name}
    last_bytes = next((o.warehouse_bytes for o in reversed(outcomes) if o.warehouse_bytes), 0)
    count = times.get("runs", 0)
    passed = sum(1 for c in checks if c.ok)
    lines = [
        "# make soak: a simulated day",
        "",
        f"{settings.tables} tables, {settings.minutes} simulated minutes, a run every {settings.run_every}, "
        f"maintain every {settings.maintain_every}, seed {settings.seed}; wall time {wall_seconds / 60:.1f} min.",
        "The commands in "
        + (
            "one long-lived process (SOAK_MODE=loop, as `run --every --maintain-every`), started again after a kill."
            if settings.mode == "loop"
            else "a process each (SOAK_MODE=processes, as cron starts `make run`)."
        ),
        "",
        "| figure | value |",
        "|---|---|",
        f"| runs | {len(runs)} ({len(killed)} killed with SIGKILL: "
        + (", ".join(f"run {o.number} at {o.kill_at}" for o in killed) or "none")
        + ") |",
        f"| seconds per run, median (all finished runs) | {median([o.seconds for o in runs if o.ok]):.1f} |",
        f"| seconds per run, median of the first {count} runs ({times.get('first_span', '-')}; not run 1) "
        f"| {times.get('first', 0):.1f} |",
        f"| seconds per run, median of the last {count} runs ({times.get('last_span', '-')}) "
        f"| {times.get('last', 0):.1f} |",
        "| recovery (the run after a kill), seconds | "
        + (", ".join(f"{o.seconds:.1f}" for o in recoveries) or "none")
        + " |",
        f"| maintain, median seconds ({len(maintains)} runs) | {median([o.seconds for o in maintains]):.1f} |",
        f"| erase, seconds | {', '.join(f'{o.seconds:.1f}' for o in erase) or 'none'} |",
        f"| warehouse at the end | {last_bytes / 2**20:.1f} MiB |",
        f"| current-state tables: snapshots at the end (max) | {_most(current, 'snapshots')} |",
        f"| current-state tables: data/delete files on disk (max) | {_most(current, 'files_on_disk')} |",
        f"| meta tables: snapshots at the end (max; 7-day window) | {_most(meta, 'snapshots')} |",
        f"| files left by killed runs (orphans, removed after 3 days) | {_total(storage, 'left_by_kills')} |",
        f"| change events (sum of the batch log) | {sum(s['change_events'][0] for s in sums.values())} |",
        f"| checks | {passed} of {len(checks)} passed |",
        "",
        "![seconds per command](run_seconds.png)",
        "",
        "## Checks",
        "",
    ]
    lines += [f"- {'PASS' if c.ok else 'FAIL'} {c.name}: {c.detail}" for c in checks]
    lines += ["", "## The batch log's sums per table (logged / replay)", ""]
    names = ["files", "change_events", "rows_inserted", "rows_updated", "rows_deleted", "ignored_older"]
    names += ["ignored_redelivered", "ignored_tombstoned", "superseded", "deletes_without_row"]
    lines += ["| table | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for model, counts in sums.items():
        lines.append(f"| {model} | " + " | ".join(f"{counts[n][0]} / {counts[n][1]}" for n in names) + " |")
    return "\n".join(lines) + "\n"
