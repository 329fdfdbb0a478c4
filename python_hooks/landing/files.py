"""Which files of a landing folder are raw change files, and in which order producers wrote them.

THE listing rule of the Python side (the schema hook, erasure, add-source, the run's checks):
Parquet files directly in the folder or in any subfolder (DMS's DatePartitionEnabled
<yyyy>/<mm>/<dd>/, the S3 sink's partition=<p>/); hidden files and folders (a name starting with
`.` or `_`: `_SUCCESS`, `.crc`, `_temporary/`, an upload in progress) are not raw files, as for
Spark. The staging macros list folders in SQL with the same rule (macros/cdc/landing.sql:
cdc_landing_listing_sql, cdc_landing_probe, and cdc_landing_raw_table, which the staging views
read); tests/pytest/unit/test_rules_pinned.py holds the two together.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

HIDDEN_PREFIXES = (".", "_")
RAW_SUFFIX = ".parquet"


def is_raw_file(relative: Path) -> bool:
    """A path relative to its landing folder names a raw file: Parquet, nothing hidden on the way."""
    return relative.name.endswith(RAW_SUFFIX) and not any(part.startswith(HIDDEN_PREFIXES) for part in relative.parts)


def is_local(landing: str) -> bool:
    """A landing folder given as a path on this machine, which Python lists; a URI (s3a://...,
    file:...) is listed by Spark instead."""
    return ":" not in landing.split("/", 1)[0]


def landing_files(folder: Path) -> list[Path]:
    """The raw Parquet files of a landing folder (unordered; [] when the folder does not exist)."""
    if not folder.is_dir():
        return []
    return [p for p in folder.rglob("*" + RAW_SUFFIX) if is_raw_file(p.relative_to(folder))]


def delivery_order(producer: str, path: Path) -> tuple:
    """Sort key: the order a producer wrote its files. DMS: the full load (LOAD*) first, then CDC
    files by name (a timestamp), whatever their date subfolder. Debezium through the S3 sink:
    <topic>+<partition>+<start offset>.<ext>, by start offset (0 when a name has none)."""
    if producer == "dms":
        return (not path.name.startswith("LOAD"), path.name, str(path))
    parts = path.name.split("+")
    digits = parts[-1].split(".")[0] if len(parts) >= 3 else ""
    return (int(digits) if digits.isdigit() else 0, path.name, str(path))


def raw_files(folder: Path, producer: str) -> list[Path]:
    """The raw files of a landing folder, oldest first (`delivery_order`)."""
    return sorted(landing_files(folder), key=lambda path: delivery_order(producer, path))


def file_size(path: Path) -> int:
    """Bytes; -1 when the file went away since it was listed."""
    try:
        return path.stat().st_size
    except OSError:
        return -1


def empty_files(folder: Path) -> list[Path]:
    """The raw files of 0 bytes: an upload in progress or one that failed. Spark's listing skips
    them, so without this check such a file would wait unseen, and unreported, for ever."""
    return [path for path in sorted(landing_files(folder)) if file_size(path) == 0]


def probe_name(source_name: str, table_name: str, landing: str) -> str:
    """The binaryFile table that lists a source's folder in the meta schema (macros/cdc/landing.sql:
    cdc_landing_probe names it the same way): the folder's hash in the name, so a moved landing
    root gets a table of its own."""
    folder = landing.rstrip("/")
    return f"landing__{source_name}__{table_name}__{hashlib.md5(folder.encode()).hexdigest()[:8]}"
