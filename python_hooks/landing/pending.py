"""The raw files waiting per current-state table: listed in its landing folder, not in its ledger.

A landing folder on this machine or on S3 is listed here, in Python (landing/files.py, through
project/storage.py), and every table's ledger is read in one query: a run with nothing new costs
one small query, not a Spark listing per table. A folder Python cannot list (another scheme than
a path, file:, s3a:// or s3://) is read from the binaryFile listing table that staging keeps for
it (macros/cdc/landing.sql). No raw file is opened either way."""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from python_hooks.landing.files import is_listed_here, landing_files, probe_name
from python_hooks.project.meta import FILE_LEDGER
from python_hooks.project.sql import quoted_relation, sql_string
from python_hooks.project.storage import StoredFile
from python_hooks.project.tables import CdcTable
from python_hooks.project.warehouse import Warehouse, keep, read_kept

# The listing rule of landing/files.py in SQL over a binaryFile listing's `path`, as
# macros/cdc/landing.sql (cdc_landing_listing_sql) writes it: Parquet files, no hidden file.
RAW_PATH_FILTER_SQL = "path like '%.parquet' and not regexp(path, '/[._][^/]*$')"


def table_probe(table: CdcTable) -> str:
    return probe_name(table.source_name, table.table_name, table.landing)


def applied_files(
    warehouse: Warehouse, tables: Sequence[CdcTable], cache_dir: Path | None = None
) -> dict[str, set[str]]:
    """model identifier -> the raw file names its ledger lists, for every table in one query.

    With `cache_dir` (the hooks' state folder), the answer is kept there with the ledger's snapshot
    id, and taken from there while the ledger's current snapshot is the same (an Iceberg snapshot is
    immutable): a run after a run that applied nothing reads one row of metadata instead of the ledger."""
    if not tables:
        return {}
    ledger = ledger_relation(warehouse)
    snapshot = None
    if cache_dir is not None:
        snapshots = warehouse.meta_snapshots()
        if FILE_LEDGER in snapshots and snapshots[FILE_LEDGER] is None:
            return {t.identifier: set() for t in tables}  # never written: no file applied, no query
        snapshot = snapshots.get(FILE_LEDGER)
        cached = _cached_ledger(Path(cache_dir), ledger, snapshot)
        if cached is not None and all(t.identifier in cached for t in tables):
            return {t.identifier: cached[t.identifier] for t in tables}
    names = ", ".join(sql_string(t.identifier) for t in tables)
    rows = warehouse.query(f"select model_name, file_name from {ledger} where model_name in ({names})")
    applied: dict[str, set[str]] = {t.identifier: set() for t in tables}
    for model_name, file_name in rows:
        applied.setdefault(model_name, set()).add(file_name)
    if cache_dir is not None and snapshot is not None:
        _keep_ledger(Path(cache_dir), ledger, snapshot, applied)
    return applied


LEDGER_CACHE = "ledger_cache.json"


def ledger_relation(warehouse: Warehouse) -> str:
    return quoted_relation(warehouse.meta_schema, FILE_LEDGER)


def ledger_cached(cache_dir: Path, ledger: str) -> bool:
    """Whether the hooks' state folder holds the ledger's rows as of one of its snapshots."""
    try:
        return json.loads((cache_dir / LEDGER_CACHE).read_text(encoding="utf-8"))["relation"] == ledger
    except (OSError, ValueError, KeyError, TypeError):
        return False


def note_recorded(
    cache_dir: Path, ledger: str, parent: str, snapshot: str, files: Mapping[str, Collection[str]]
) -> bool:
    """After a run's one INSERT into the ledger made `snapshot` from `parent` (nothing else committed
    between: the parent says so, Iceberg's history being linear): when the cache holds the ledger as of
    `parent`, it then holds it as of `snapshot`, each model's `files` added, so the next run reads one row
    of metadata instead of the ledger. A model the cache did not hold stays out (read again). True when
    the cache was carried forward."""
    cached = _cached_ledger(cache_dir, ledger, parent)
    if cached is None:
        return False
    for model, names in files.items():
        if model in cached:
            cached[model] |= set(names)
    _keep_ledger(cache_dir, ledger, snapshot, cached)
    return True


def _cached_ledger(cache_dir: Path, ledger: str, snapshot: str | None) -> dict[str, set[str]] | None:
    applied = read_kept(cache_dir / LEDGER_CACHE, ledger, snapshot)
    try:
        return None if applied is None else {str(model): set(map(str, files)) for model, files in applied.items()}
    except (TypeError, AttributeError):  # damaged: read the ledger
        return None


def _keep_ledger(cache_dir: Path, ledger: str, snapshot: str, applied: dict[str, set[str]]) -> None:
    keep(cache_dir / LEDGER_CACHE, ledger, snapshot, {m: sorted(f) for m, f in applied.items()})


@dataclass(frozen=True)
class Pending:
    """What waits per current-state model: how many raw files (every model whose table exists), and,
    for a folder Python lists, which ones: {model identifier: {"folder": ..., "files": [[name, path relative
    to the folder], ...], "bytes": their size}}, oldest name first, as macros/cdc/landing.sql:
    cdc_landing_pending lists them (the run hands this plan to dbt: `plan_environment`), and, for those
    folders, the file names each model's ledger lists ({model identifier: names}: `applied_files`; the
    schema hook plans from the others)."""

    counts: dict[str, int] = field(default_factory=dict)
    plan: dict[str, dict] = field(default_factory=dict)
    applied: dict[str, set[str]] = field(default_factory=dict)


def pending(
    warehouse: Warehouse,
    tables: Sequence[CdcTable],
    cache_dir: Path | None = None,
    listings: Mapping[str, Sequence[StoredFile]] | None = None,
) -> Pending:
    """The files waiting: listed in the landing folder, not in the ledger. Only models whose table
    exists (and, for a folder Python cannot list, whose listing table does). `cache_dir`: see
    `applied_files`. `listings`: each table's `landing_files` by model identifier, listed once for the
    whole run (commands/run.py), else listed here. A folder on S3 that cannot be listed is a StorageError
    (project/storage.py).

    Which tables exist is asked last: when a folder holds a file its ledger does not list, from the listing of
    the table's schema that the schema hook reads next anyway (`Warehouse.listed_columns`), so a run with new
    files asks no `show tables`; a run with nothing new asks only that (the lighter statement)."""
    meta = warehouse.meta_schema
    if not tables or not warehouse.table_exists(meta, FILE_LEDGER):
        return Pending()
    listed = [t for t in tables if is_listed_here(t.landing)]
    applied = applied_files(warehouse, listed, cache_dir)
    listings = listings if listings is not None else {t.identifier: landing_files(t.folder) for t in listed}
    new = {t.identifier: [f for f in listings[t.identifier] if f.name not in applied[t.identifier]] for t in listed}
    for schema in sorted({t.schema for t in listed if new[t.identifier]}):
        warehouse.listed_columns(schema)
    built = {t.identifier for t in tables if warehouse.table_exists(t.schema, t.identifier)}
    counts: dict[str, int] = {}
    plan: dict[str, dict] = {}
    for table in (t for t in listed if t.identifier in built):
        waiting = sorted((file.name, file.relative) for file in new[table.identifier])
        counts[table.model] = len(waiting)
        names = [name for name, _ in waiting]
        if waiting and len(set(names)) == len(names):  # two files of one name: the macro refuses them
            plan[table.identifier] = {
                "folder": table.landing.rstrip("/"),
                "files": [list(w) for w in waiting],
                "bytes": sum(file.size for file in new[table.identifier]),
            }
    remote = [
        t
        for t in tables
        if t.identifier in built and not is_listed_here(t.landing) and warehouse.table_exists(meta, table_probe(t))
    ]
    applied = {identifier: names for identifier, names in applied.items() if identifier in built}
    return Pending({**counts, **_pending_in_listing_tables(warehouse, remote)}, plan, applied)


def pending_files(warehouse: Warehouse, tables: Sequence[CdcTable]) -> dict[str, int]:
    """model -> how many raw files its folder lists that its ledger does not: the files waiting."""
    return pending(warehouse, tables).counts


# The run's plan reaches dbt's macros through these variables (macros/cdc/landing.sql: cdc_run_plan): its
# tables' entries in parts, CDC_RUN_PLAN, CDC_RUN_PLAN_2, ..., CDC_RUN_PLAN_<n> with n in CDC_RUN_PLAN_PARTS
# (unset: one part), so that every table of a run of hundreds is planned while each variable stays under what
# one may hold when a process starts (Linux: 128 KiB). A table whose entry alone is longer than a part (a first
# build of thousands of files) is left out of it, and its model lists its files itself.
PLAN_VARIABLE = "CDC_RUN_PLAN"
PLAN_PARTS_VARIABLE = "CDC_RUN_PLAN_PARTS"
PLAN_PART_MAX_CHARS = 100_000
# What the staging views' data tests read in a run with a plan (macros/cdc/staging_tests.sql).
STAGING_TEST_FILES_VARIABLE = "CDC_STAGING_TEST_FILES"


def plan_parts(plan: dict[str, dict]) -> list[dict[str, dict]]:
    """The plan's entries in parts whose JSON text is at most PLAN_PART_MAX_CHARS each, in the plan's order;
    an entry longer than that alone is in none."""
    parts: list[dict[str, dict]] = [{}]
    size = 2
    for identifier, entry in plan.items():
        length = len(json.dumps({identifier: entry}))
        if length + 2 > PLAN_PART_MAX_CHARS:
            continue
        if size + length > PLAN_PART_MAX_CHARS:
            parts.append({})
            size = 2
        parts[-1][identifier] = entry
        size += length
    return parts


def plan_environment(parts: Sequence[dict[str, dict]]) -> dict[str, str]:
    """The variables that hand the plan's parts (`plan_parts`) to the macros."""
    handed = {PLAN_VARIABLE: json.dumps(parts[0] if parts else {})}
    for number, part in enumerate(parts[1:], start=2):
        handed[f"{PLAN_VARIABLE}_{number}"] = json.dumps(part)
    if len(parts) > 1:
        handed[PLAN_PARTS_VARIABLE] = str(len(parts))
    return handed


def staging_test_files(plan: dict[str, dict], tables: Sequence[CdcTable]) -> str:
    """The JSON text of CDC_STAGING_TEST_FILES: per staging model of a table the plan holds (the plan as
    handed to dbt), its files' names as Spark SQL string literals, comma-separated, for the macro to
    put in its `in (...)` as they are (no quoting rule in Jinja)."""
    names: dict[str, set[str]] = {}
    for table in tables:
        entry = plan.get(table.identifier)
        if entry is not None:
            names.setdefault(table.staging_model, set()).update(name for name, _ in entry["files"])
    return json.dumps({model: ", ".join(sql_string(n) for n in sorted(files)) for model, files in names.items()})


def _pending_in_listing_tables(warehouse: Warehouse, tables: Sequence[CdcTable]) -> dict[str, int]:
    """`pending_files` from the binaryFile listing tables of folders Python cannot list."""
    if not tables:
        return {}
    meta = warehouse.meta_schema
    parts = []
    for table in tables:
        probe = quoted_relation(meta, table_probe(table))
        warehouse.execute(f"refresh table {probe}")
        parts.append(
            f"select {sql_string(table.model)} as model, count(*) as pending"
            f" from (select regexp_extract(path, '[^/]*$', 0) as file_name from {probe}"
            f" where {RAW_PATH_FILTER_SQL}) as listing"
            f" left anti join (select file_name from {quoted_relation(meta, FILE_LEDGER)}"
            f" where model_name = {sql_string(table.identifier)}) as ledger"
            f" on listing.file_name = ledger.file_name"
        )
    return {model: int(n) for model, n in warehouse.query(" union all ".join(parts))}


def idle_models(tables: Sequence[CdcTable], waiting: Pending) -> set[str]:
    """The current-state models (and their staging models) with nothing to apply: the table exists
    and every raw file its folder lists is in its ledger (`pending`)."""
    idle = set()
    for table in tables:
        if waiting.counts.get(table.model, 1) == 0:
            idle.update({table.model, table.staging_model})
    return idle
