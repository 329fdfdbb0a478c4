"""Which files of a landing folder are raw change files, and in which order producers wrote them.

THE listing rule of the Python side (the schema hook, erasure, add-source, the run's checks):
Parquet files directly in the folder or in any subfolder (DMS's DatePartitionEnabled
<yyyy>/<mm>/<dd>/, the S3 sink's partition=<p>/); hidden files and folders (a name starting with
`.` or `_`: `_SUCCESS`, `.crc`, `_temporary/`, an upload in progress) are not raw files, as for
Spark. The staging macros list folders in SQL with the same rule (macros/cdc/landing.sql:
cdc_landing_listing_sql, cdc_landing_probe, and cdc_landing_raw_table, which the staging views
read); tests/pytest/unit/test_rules_pinned.py holds the two together.

A folder is a landing string (a path, `file:`, `s3a://` or `s3://`), a local `Path` or a
`Location`: every one is listed through the one seam, python_hooks/project/storage.py, so a folder
on S3 is listed exactly like a local one. A listed file is a `StoredFile` (its location, its path
inside the folder, its size and modification time).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import PurePath, PurePosixPath

from python_hooks.project.storage import Location, StoredFile, location

HIDDEN_PREFIXES = (".", "_")
RAW_SUFFIX = ".parquet"

Folder = Location | str | os.PathLike[str]


def is_raw_file(relative: str | PurePath) -> bool:
    """A path relative to its landing folder names a raw file: Parquet, nothing hidden on the way."""
    parts = PurePosixPath(relative).parts
    return bool(parts) and parts[-1].endswith(RAW_SUFFIX) and not any(p.startswith(HIDDEN_PREFIXES) for p in parts)


def is_local(landing: Folder) -> bool:
    """A landing folder on this machine's disk (a path or a `file:` URI)."""
    return location(landing).is_local


def is_listed_here(landing: Folder) -> bool:
    """A landing folder Python lists (this machine's disk or S3); any other scheme is listed by
    Spark, through its binaryFile listing table (landing/pending.py)."""
    return location(landing).reachable


def landing_files(folder: Folder) -> list[StoredFile]:
    """The raw Parquet files of a landing folder (unordered; [] when the folder does not exist)."""
    return [file for file in location(folder).files() if is_raw_file(file.relative)]


def delivery_order(producer: str, file: StoredFile | PurePath) -> tuple:
    """Sort key: the order a producer wrote its files. DMS: the full load (LOAD*) first, then CDC
    files by name (a timestamp), whatever their date subfolder. Debezium through the S3 sink:
    <topic>+<partition>+<start offset>.<ext>, by start offset (0 when a name has none)."""
    if producer == "dms":
        return (not file.name.startswith("LOAD"), file.name, str(file))
    parts = file.name.split("+")
    digits = parts[-1].split(".")[0] if len(parts) >= 3 else ""
    return (int(digits) if digits.isdigit() else 0, file.name, str(file))


def raw_files(folder: Folder, producer: str, listed: Sequence[StoredFile] | None = None) -> list[StoredFile]:
    """The raw files of a landing folder, oldest first (`delivery_order`). `listed`: the folder's
    `landing_files`, listed once for the whole run (commands/run.py), else listed now."""
    files = landing_files(folder) if listed is None else listed
    return sorted(files, key=lambda file: delivery_order(producer, file))


def file_size(file: StoredFile | Folder) -> int:
    """Bytes: a listed file's size as listed; for a path or location, as the store says now (-1
    when there is no file there)."""
    if isinstance(file, StoredFile):
        return file.size
    found = location(file).info()
    return -1 if found is None else found.size


def empty_files(folder: Folder, listed: Sequence[StoredFile] | None = None) -> list[StoredFile]:
    """The raw files of 0 bytes: an upload in progress or one that failed. Spark's listing skips
    them, so without this check such a file would wait unseen, and unreported, for ever. `listed`: as
    for `raw_files`."""
    files = landing_files(folder) if listed is None else listed
    return [file for file in sorted(files) if file_size(file) == 0]


def probe_name(source_name: str, table_name: str, landing: str) -> str:
    """The binaryFile table that lists a source's folder in the meta schema (macros/cdc/landing.sql:
    cdc_landing_probe names it the same way): the folder's hash in the name, so a moved landing
    root gets a table of its own."""
    folder = landing.rstrip("/")
    return f"landing__{source_name}__{table_name}__{hashlib.md5(folder.encode()).hexdigest()[:8]}"
