"""The run's last lines, after dbt's own summary: what was refused or failed, in words, and what to do."""

from __future__ import annotations

import re
from collections.abc import Sequence

from python_hooks.project.storage import failure_in

WHAT_TO_DO = (
    "What to do: fix or remove each raw file named above in its landing folder (or the source change it"
    " reports), then run again: nothing of a refused batch was applied, and the next run applies it whole"
    " (README: Operations)."
)


def _one_line(message: str, most: int = 12) -> list[str]:
    """A dbt error message as its meaningful lines: dbt's 'Compilation Error in model x (path)' header,
    dbt's macro call chain ('> in macro …'), blank lines and a Spark plan or Java stack trace (all in
    logs/dbt.log) left out; at most `most` lines. An object store failure (Spark's S3A: keys refused,
    endpoint down, bucket missing) is the one line the Python side says of it (project/storage.py)."""
    storage = failure_in(str(message))
    if storage is not None:
        return [str(storage)]
    lines = []
    for line in (line.strip() for line in str(message).splitlines()):
        if line.startswith(("+-", ":", "'", "at ", "== ", "Caused by", "JVM stacktrace")):
            break
        if line and not line.startswith(">") and not re.match(r"^(Compilation|Runtime|Database) Error( in |$)", line):
            lines.append(line)
    if len(lines) > most:
        lines = [*lines[: most - 1], f"... ({len(lines) - most + 1} more lines in logs/dbt.log)"]
    return lines


def run_summary(result, problems: Sequence[str], blocked: set[str]) -> list[str]:
    """The run's last lines, after dbt's own summary: what was refused or failed and what to do; one
    line that all went well otherwise."""
    failed, skipped = [], []
    for node_result in getattr(result.result, "results", None) or []:
        status = str(node_result.status).lower()
        name = node_result.node.name
        if status in ("error", "fail", "runtime error"):
            failed.append((name, _one_line(node_result.message or status)))
        elif status == "skipped" and getattr(node_result.node, "resource_type", "model") != "test":
            skipped.append(name)
    if result.result is None or not hasattr(result.result, "results"):
        failed.append(("dbt build", _one_line(str(result.exception))))
    if not failed and not problems:
        return []
    lines = [f"this run refused or failed {len(failed) + len(problems)} thing(s); every other table was built:"]
    lines += [f"refused: {problem}" for problem in problems]
    if blocked:
        lines.append(f"not built this run: {', '.join(sorted(blocked))}")
    for name, message in failed:
        lines.append(f"failed: {name}: {message[0] if message else 'failed'}")
        lines.extend(f"  {line}" for line in message[1:])
    if skipped:
        lines.append(f"skipped (they depend on the above): {', '.join(sorted(skipped))}")
    lines.append(WHAT_TO_DO)
    return lines
