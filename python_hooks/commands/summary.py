"""The run's last lines, after dbt's own summary: what was refused or failed, in words, and what to do."""

from __future__ import annotations

import re
from collections.abc import Sequence
from urllib.parse import unquote

from python_hooks.project.storage import failure_in

WHAT_TO_DO = (
    "What to do: fix or remove each raw file named above in its landing folder (or the source change it"
    " reports), then run again: nothing of a refused batch was applied, and the next run applies it whole"
    " (docs/operations.md)."
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


# Spark's own words for a raw file it could not read (its error classes, a Java exception and a plan follow
# them), said again in words naming the file: {file} is the path Spark names.
_SPARK_FILE_ERRORS = (
    (
        re.compile(r"Encountered error while reading file (?P<file>\S+?)\.? Details"),
        "raw file {file} could not be read: its Parquet pages or footer do not decode (damaged in storage or by"
        " its producer, or cut short), or a Hadoop checksum file beside it (.<name>.crc) is damaged; nothing"
        " of the batch was applied. Replace it with a good copy under the same name (and delete a stale"
        " .crc), or delete it",
    ),
    (  # Hadoop's local file system checks a .crc beside the file where Spark reads it unwrapped (a staging test)
        re.compile(r"ChecksumException: Checksum error: (?P<file>\S+?) at \d+"),
        "raw file {file} could not be read: the Hadoop checksum file beside it (.<name>.crc) does not match it"
        " (the .crc is stale or damaged, or the file is); nothing of the batch was applied. Delete the stale .crc,"
        " or replace the file with a good copy under the same name, or delete it",
    ),
    (
        re.compile(r"Could not read footer for file: (?P<file>\S+?)\. "),
        "raw file {file} has no readable Parquet footer (not a Parquet file, cut short, or damaged); nothing"
        " of the batch was applied. Replace it with a good copy under the same name, or delete it",
    ),
    (  # Hadoop's local file system, a file deleted between the run's listing and Spark's read
        re.compile(r"File (?P<file>(?:file:)?/[^\n]*?\.parquet) does not exist"),
        "raw file {file} is gone since the run listed it (deleted or moved while the run ran); nothing of the"
        " batch was applied. If it was removed on purpose there is nothing to do; otherwise land it again",
    ),
    (
        re.compile(r"(?:: |^)(?P<file>(?:file:)?/[^\n]*?\.parquet) \(Permission denied\)", re.MULTILINE),
        "raw file {file} cannot be read: permission denied to the user running Spark; nothing of the batch was"
        " applied. Make it readable by that user (chmod, chown), then run again",
    ),
)
# The cause Spark gives after its own words, kept short: the exception's message without its Java class.
_CAUSE = re.compile(r"Caused by: (?:[\w.$]+(?:Exception|Error)): (?P<cause>[^\n]+)")


def spark_file_error(message: str, tables: Sequence = ()) -> tuple[str, str] | None:
    """(the table, one line in words) when a failed node's message says Spark could not read a raw file,
    the table being the current-state model of `tables` (CdcTable) whose folder holds the file; None when
    the message says something else."""
    for pattern, words in _SPARK_FILE_ERRORS:
        found = pattern.search(message)
        if found:
            file = re.sub(r"^file:/*", "/", unquote(found.group("file")))
            causes = [c.group("cause").strip() for c in _CAUSE.finditer(message)]
            cause = f" (Spark says: {causes[-1][:200]})" if causes else ""
            table = next((t for t in tables if file.startswith(str(t.folder).rstrip("/") + "/")), None)
            owner = f"{table.model} (source {table.source})" if table else "a raw file's table"
            return (table.model if table else file), f"{owner}: {words.format(file=file)}{cause}"
    return None


def _reads(parents: Sequence[str], table) -> bool:
    """A node whose parents (dbt unique ids) are the table's model or its staging model."""
    return any(p.endswith((f".{table.model}", f".{table.staging_model}")) for p in parents)


def run_summary(result, problems: Sequence[str], blocked: set[str], tables: Sequence = ()) -> list[str]:
    """The run's last lines, after dbt's own summary: what was refused or failed and what to do; one
    line that all went well otherwise. `tables` (CdcTable): to name the table of a raw file Spark could not
    read, which fails every node that reads it (the staging view's tests, the model): one line for all."""
    failed, skipped, others = [], [], []
    unreadable: dict[str, tuple[str, list[str]]] = {}  # table -> (its line, the nodes that failed on it)
    for node_result in getattr(result.result, "results", None) or []:
        status = str(node_result.status).lower()
        name = node_result.node.name
        if status in ("error", "fail", "runtime error"):
            worded = spark_file_error(str(node_result.message or ""), tables)
            if worded:
                unreadable.setdefault(worded[0], (worded[1], []))[1].append(name)
            else:
                others.append((name, _one_line(node_result.message or status), node_result.node))
        elif status == "skipped" and getattr(node_result.node, "resource_type", "model") != "test":
            skipped.append(name)
    # A node of a table with an unreadable file whose Spark message names no file (the same read, failed
    # in another place): one of the nodes that failed on that file, not a line of its own.
    owners = {f".{n}" for t in tables if t.model in unreadable for n in (t.model, t.staging_model)}
    for name, lines, node in others:
        parents = list(getattr(getattr(node, "depends_on", None), "nodes", None) or [])
        table = next((t for t in tables if t.model in unreadable and _reads(parents, t)), None) if owners else None
        if table is not None:
            unreadable[table.model][1].append(name)
        else:
            failed.append((name, lines))
    for line, names in unreadable.values():
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        failed.append(("", [f"{line}; it failed {shown}"]))
    # a build that failed before any node (a run with nothing new runs no build: success, no results)
    if not result.success and (result.result is None or not hasattr(result.result, "results")):
        failed.append(("dbt build", _one_line(str(result.exception))))
    if not failed and not problems:
        return []
    lines = [f"this run refused or failed {len(failed) + len(problems)} thing(s); every other table was built:"]
    lines += [f"refused: {problem}" for problem in problems]
    if blocked:
        lines.append(f"not built this run: {', '.join(sorted(blocked))}")
    for name, message in failed:
        lines.append(f"failed: {name + ': ' if name else ''}{message[0] if message else 'failed'}")
        lines.extend(f"  {line}" for line in message[1:])
    if skipped:
        lines.append(f"skipped (they depend on the above): {', '.join(sorted(skipped))}")
    lines.append(WHAT_TO_DO)
    return lines
