"""Schema evolution of the current-state Iceberg tables, run before dbt (`python -m python_hooks evolve`).

For every current-state model of the dbt project (materialized `cdc_current_state`; found in the
manifest, through its staging model, to the source and its landing folder) it:

1. reads the Parquet footers of the table's raw files listed now (only those not read before:
   `FooterCache`, kept in `$CDC_WAREHOUSE/_python_hooks/`) and computes the union of the new files it
   accepts (`inspect_table`: THE RULE of which files' columns reach a table); an applied file changed in
   place since (replaced, damaged) gets one warning and is read by nothing;
2. reads the Iceberg table's schema (a missing table is "not created yet": dbt creates it);
3. plans (`evolution.plan.plan_schema_changes`): columns to add, promotions to apply, refusals;
4. logs each change of the plan in `schema_evolution_log`, then applies it with quoted identifiers;
5. when raw files disagree on a column's type (an int column now sent as bigint), records which
   files Spark must read with which types (`cdc_raw_file_groups`), so that staging reads each
   group on its own and casts to the promoted type (Spark cannot read both in one relation); also
   when an applied file changed in place, so that staging reads the other files only (that file is
   registered as left out: `LEFT_OUT_GROUP`). The files at the union's types are the open group
   (`OPEN_GROUP`), which staging reads as the folder less the other groups.

A table with a refused change or an unreadable new file is left as it is and reported; the others go
on. `blocked_models` lists what dbt must not build this run.
"""

from __future__ import annotations

import json
import logging
import os
import re
import uuid
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from python_hooks.evolution.footers import (
    FOOTER_CACHE,
    FooterCache,
    FooterReadError,
    RawFile,
    column_types,
    read_pages,
    struct_fields,
    union_of,
)
from python_hooks.evolution.plan import (
    ColumnChange,
    Plan,
    Refusal,
    SchemaShapeError,
    business_schema,
    decoded_schema,
    plan_schema_changes,
)
from python_hooks.evolution.types import normalize_type, spark_type
from python_hooks.landing.files import is_listed_here, raw_files
from python_hooks.landing.validation import FillFacts, PooledChecks, holds_value
from python_hooks.project import faults
from python_hooks.project.meta import RAW_FILE_GROUPS, SCHEMA_EVOLUTION_LOG
from python_hooks.project.sql import quoted_relation
from python_hooks.project.sql import sql_string_or_null as _text
from python_hooks.project.storage import Location, StorageError, StoredFile, location
from python_hooks.project.tables import CdcTable, cdc_tables
from python_hooks.project.warehouse import Warehouse, keep, read_kept

log = logging.getLogger(__name__)

# The group id under which the hooks register, in cdc_raw_file_groups, the files staging must not read (applied
# files changed in place: one warning each); their column types are null (macros/cdc/landing.sql reads it so).
LEFT_OUT_GROUP = -1
# The group id of the files that hold every column at the union's type (`file_groups`), when they can be read as a
# table (`readable_as_table`): the group new files of the producer's current schema join. The staging view reads it
# as the folder less the other groups' files (macros/cdc/landing.sql: cdc_landing_open_read), so its SQL, and its
# fingerprint, do not change as files land.
OPEN_GROUP = -2
# A struct field in a footer's type (evolution/types.py: spark_type quotes each: struct<`id`:int>), and the names
# Spark prints so that cdc_ddl_type can quote them again.
QUOTED_FIELD = re.compile(r"`((?:[^`]|``)*)`:")
PLAIN_FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass
class EvolutionResult:
    run_id: str
    applied: list[ColumnChange] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    blocked_models: set[str] = field(default_factory=set)
    # staging model -> what its view's SQL is made of: the raw files' union schema and file groups
    # (evolution/staging_views.py fingerprints it)
    staging_inputs: dict[str, str] = field(default_factory=dict)
    # model -> its table's column names after this run's changes (tables that existed), and the staging
    # models whose raw files are read in groups: handed to the batches in the run's plan
    # (commands/run.py), so that a batch need not ask Spark again
    columns: dict[str, list[str]] = field(default_factory=dict)
    grouped: set[str] = field(default_factory=set)
    # staging model -> group id -> the raw column names and struct fields Spark merges from that group's files
    # (`group_columns`): handed to its view and batches in the run's plan, so that they need not ask Spark
    group_columns: dict[str, dict[int, dict]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems


def keyless_files(table: CdcTable, file_types: dict[str, dict[str, str]]) -> dict[str, list[str]]:
    """The raw files that lack a key column (case-insensitive) of a DMS or flattened Debezium table, with
    the keys each lacks (an envelope holds its keys inside `before`/`after`): their events could be
    matched to no row, and Spark could not even resolve the column in a batch of such files alone."""
    if table.producer == "debezium_envelope" or not table.keys:
        return {}
    missing = {file: [k for k in table.keys if k.lower() not in types] for file, types in sorted(file_types.items())}
    return {file: keys for file, keys in missing.items() if keys}


def missing_keys(table: CdcTable, file_types: dict[str, dict[str, str]]) -> list[str]:
    """One message per raw file that lacks a key column (`keyless_files`)."""
    return [
        f"raw file {file} has no key column {', '.join(repr(k) for k in missing)} (unique_key of model"
        f" {table.model}): its changes cannot be applied; fix the producer and replace the file"
        f" [model {table.model}, source {table.source}]"
        for file, missing in keyless_files(table, file_types).items()
    ]


def file_groups(
    folder: Location | str | os.PathLike[str], file_types: dict[str, dict[str, str]], union: dict[str, str]
) -> list[tuple[bool, dict[str, dict[str, str]]]]:
    """Files grouped so that within a group every column has one type, each with whether it holds every column at
    the union's type (the open group, when `readable_as_table`: OPEN_GROUP) and its files' types by path inside
    `folder`. One group: nothing to record. `file_types` is keyed by each file's location string (the footer
    cache's key)."""
    groups: dict[tuple, dict[str, dict[str, str]]] = {}
    for name, types in sorted(file_types.items()):
        signature = tuple(sorted((c, t) for c, t in types.items() if c in union and t not in (union[c], "null")))
        groups.setdefault(signature, {})[location(name).relative_to(folder)] = types
    return [(not k, groups[k]) for k in sorted(groups)]


def readable_as_table(types_of_files: Iterable[dict[str, str]], union_names: Iterable[str]) -> bool:
    """Whether the open group's files can be read as a catalog table declared with their columns
    (macros/cdc/landing.sql: cdc_landing_open_read asks Spark for them, and quotes a struct's field names,
    cdc_ddl_type): no struct field whose name is not a plain identifier (in Spark's print of the type it could
    not be told from the syntax), no column that is null in every file (Spark reads it as void, which no table
    holds), no two spellings of one name. Otherwise the group stays a list of files, and its files stay in the
    view's fingerprint."""
    names = [name.lower() for name in union_names]
    if len(set(names)) != len(names):
        return False
    typed: set[str] = set()
    seen: set[str] = set()
    for types in types_of_files:
        for column, spark in types.items():
            if not all(PLAIN_FIELD.fullmatch(name) for name in QUOTED_FIELD.findall(spark)):
                return False
            seen.add(column)
            if spark != "null":
                typed.add(column)
    return seen <= typed


def _refusal_message(refusal: Refusal, table: CdcTable, file_types: dict[str, dict[str, str]]) -> str:
    """A refusal, with the raw files whose column has the refused type (at most 3 named)."""
    # Both sides in normalize_type's words: a footer's type is spark_type's (struct<`value`:string>), the
    # refusal's normalized (struct<value:string>), so a nested type named no file (found by `make fuzz`).
    column, refused = refusal.column.lower(), normalize_type(refusal.new_type)
    files = sorted(name for name, types in file_types.items() if normalize_type(types.get(column, "")) == refused)
    named = ", ".join(files[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")
    where = f" (raw file {named})" if files else ""
    return f"{refusal.message()}{where} [model {table.model}, source {table.source}]"


def evolve(
    warehouse: Warehouse,
    manifest,
    state_dir: Path,
    run_id: str | None = None,
    skip: Iterable[str] = (),
    applied: Mapping[str, Collection[str]] | None = None,
    footers: Mapping[str, pa.Schema] | None = None,
    listings: Mapping[str, Sequence[StoredFile]] | None = None,
) -> EvolutionResult:
    """`footers`: raw files' footer schemas read just before, by location string (`refused_files`): not read
    again. `listings`: the tables' folders as the run listed them, by model identifier (landing/files.py:
    `landing_files`), else each folder is listed here. `skip`: models with nothing new to apply
    (landing.pending.idle_models): every raw file of theirs is applied, so their tables already hold every
    column of those files; they are not looked at.
    `applied`: per model identifier, the raw file names its ledger lists (landing.pending.Pending.applied;
    none: every file is read as new, as a rebuild reads them): see `inspect_table`."""
    result = EvolutionResult(run_id=run_id or str(uuid.uuid4()))
    cache = FooterCache(Path(state_dir) / FOOTER_CACHE, footers)
    group_rows: dict[str, list[tuple[int, list[str], str | None]]] = {}
    skipped = set(skip)
    for table in cdc_tables(manifest):
        if table.model in skipped:
            continue
        try:
            listed = None if listings is None else listings.get(table.identifier)
            _evolve_table(
                warehouse, table, cache, result, group_rows, (applied or {}).get(table.identifier, ()), listed
            )
        except (FooterReadError, StorageError) as error:
            result.problems.append(f"{table.model} (source {table.source}): {error}. The table was not changed.")
            result.blocked_models.update({table.staging_model, table.model})
    cache.save()
    _write_groups(warehouse, group_rows, Path(state_dir))
    return result


@dataclass(frozen=True)
class Inspection:
    """What a table's raw files say before anything is changed: the problems that refuse the table, the
    plan, the union schema of the new files accepted (`union`, planned), the union schema of the files
    staging reads (`staged`: the folder's files but those changed in place since they were applied) and
    their per-file types, the business columns and types the table holds after the plan
    (`business_types`), and one warning per applied file changed in place (`ignored`; `left_out`: those
    files' location strings). Pure but for the footers."""

    problems: list[str]
    plan: Plan | None = None
    union: pa.Schema | None = None
    incoming: pa.Schema | None = None
    file_types: dict[str, dict[str, str]] = field(default_factory=dict)
    staged: pa.Schema | None = None
    business_types: dict[str, str] = field(default_factory=dict)
    ignored: list[str] = field(default_factory=list)
    left_out: tuple[str, ...] = ()
    # per file (location string): its footer's schema (a table read in groups hands each group's columns from them)
    file_schemas: dict[str, pa.Schema] = field(default_factory=dict)


def inspect_table(
    table: CdcTable, files: Sequence[RawFile], cache: FooterCache, current, applied: Collection[str] = ()
) -> Inspection:
    """Footers of `files` (oldest first) read through `cache`, the union of the new ones checked (type
    conflicts, key columns) and planned against the table's `current` columns (None: not created yet).
    `applied`: the file names the table's ledger lists. A new file whose footer cannot be read is a
    FooterReadError naming it; every problem names the model and the file.

    THE RULE of which files' columns reach a table: the union planned is that of the files the run
    accepts, computed here every run from `files` (the folder's listing now) minus the files applied
    before (in `applied`: their columns are the table's already, and the ledger knows a file by its name,
    so a batch never reads one again) minus the files refused (no key column, a type conflict; any
    refusal refuses the table whole, so nothing is planned from a union with them either). Nothing of a
    file outlives it: a removed, replaced or refused file's columns never reach the table, in this run
    or a later one; an applied file changed in place (replaced, damaged) neither adds a column nor
    refuses the table: one warning says its new content is ignored."""
    found = cache.read(str(table.folder), files, applied)
    ignored = [
        f"{table.model} (source {table.source}): raw file {name} was already applied (cdc_file_ledger) and"
        f" has changed in place since ({why}); the ledger knows a file by its name, so its new content is"
        " ignored: land it under a new name to apply it, or put the applied copy back"
        for name, why in found.changed.items()
    ]
    left_out = tuple(found.changed)
    readable = found.schemas
    new = [(name, schema) for name, schema in readable if location(name).name not in applied]
    file_types = {name: column_types(schema) for name, schema in readable}
    new_types = {name: file_types[name] for name, _ in new}
    problems = missing_keys(table, new_types)
    keyless = keyless_files(table, new_types)
    # Conflicts are looked for among every file staging reads (the applied ones' types are the table's), and
    # refuse the table when a new file has them; the union planned is the new files' only.
    staged = union_of((name, schema) for name, schema in readable if name not in keyless)
    conflicts = [c for c in staged.conflicts if c.file in new_types]
    problems = [f"{c.message()} [model {table.model}, source {table.source}]" for c in conflicts] + problems
    refused = {c.file for c in conflicts} | set(keyless)
    union = union_of((name, schema) for name, schema in new if name not in refused)
    try:
        incoming = decoded_schema(
            business_schema(union.schema, table.producer, table.timestamp_column), dict(table.decoded_types)
        )
        staged_business = decoded_schema(
            business_schema(staged.schema, table.producer, table.timestamp_column), dict(table.decoded_types)
        )
    except SchemaShapeError as error:
        problems.append(f"{table.model} (source {table.source}): {error}")
        return Inspection(problems, None, union.schema, staged=staged.schema, ignored=ignored, left_out=left_out)
    relation = quoted_relation(table.schema, table.identifier)
    plan = plan_schema_changes(relation, current, incoming, table.timestamp_column)
    problems += [_refusal_message(refusal, table, file_types) for refusal in plan.refusals]
    kept = {name.lower() for name in incoming.names} | {name.lower() for name, _ in current or ()}
    business = {name.lower(): t for name, t in _spark_types(staged_business) if name.lower() in kept}
    return Inspection(
        problems, plan, union.schema, incoming, file_types, staged.schema, business, ignored, left_out, dict(readable)
    )


# `refused_files` reads small files this many at a time (pyarrow decodes them outside the GIL: 5,000 files of 4
# rows, 2.8 s one at a time, 1.9 s two at a time), in rounds of at most READ_ROUND_BYTES of files: what a round
# holds decoded stays bounded. A file of unknown size (not from a listing) or larger is read alone.
READERS = 2
READ_ROUND_FILES = 64
READ_ROUND_BYTES = 16 * 2**20


def refused_files(
    table: CdcTable,
    files: Sequence[RawFile],
    footers: dict[str, pa.Schema] | None = None,
    placeholders: dict[str, bool] | None = None,
    one_round: dict[str, bool] | None = None,
) -> list[str]:
    """One refusal per file of `files` that pyarrow cannot read whole (`read_pages`: gone since it was
    listed, permission denied, a footer or a page that does not decode), in the words of a footer the
    evolution could not read, and one per check of the batch's validation that its events fail
    (landing/validation.py: `PooledChecks`), in the files' order. Run before the schema is evolved and before
    dbt, on the files a batch is about to read, so that no change (a new column first) and no Spark
    statement (a staging view's data test) meets the file before the run has refused it in words.
    `footers`: filled with each file read whole's footer schema, by location string (`evolve` then reads
    none of them again). `placeholders`: for a table whose source has a placeholder for a value it did not
    send (`CdcTable.unchanged_value`), set to whether any of the files holds it (landing/validation.py:
    `holds_value`); `one_round`: for such a table, whether the fill of a batch of the files takes one round
    (`FillFacts`)."""
    problems: dict[int, list[str]] = {}
    checks = PooledChecks(table)
    paths = [location(file) for file in files]
    value = table.unchanged_value if placeholders is not None else None
    held: list[bool] = []  # appended to by the reading threads (list.append is atomic)
    facts = FillFacts(table) if value and one_round is not None else None

    def each_group(reading) -> Callable[[pa.Table], None]:
        def add(rows: pa.Table) -> None:
            if value and not held and holds_value(rows, value):
                held.append(True)
            if facts is not None:
                facts.add(rows)
            reading.add(rows)

        return add if value else reading.add

    def read(index: int):
        reading = checks.reading(index, paths[index].name)
        try:
            return reading, read_pages(files[index], each_group(reading)), None
        except (FooterReadError, StorageError) as error:
            return reading, None, error

    with ThreadPoolExecutor(READERS) as pool:
        for round_ in _read_rounds(files):
            for reading, schema, error in pool.map(read, round_) if len(round_) > 1 else map(read, round_):
                index = reading.index
                if error is not None:
                    problems[index] = [f"{table.model} (source {table.source}): {error}. The table was not changed."]
                    continue
                checks.done(reading)
                if footers is not None:
                    footers[str(paths[index])] = schema
    if value:
        placeholders[table.model] = bool(held)
        if facts is not None:
            one_round[table.model] = facts.one_round()
    for index, failures in checks.failures().items():
        problems[index] = [
            f"{table.model} (source {table.source}): raw file {paths[index]}: {failure}: a batch refuses such"
            " events; fix the producer and replace the file, or delete it. The table was not changed."
            for failure in failures
        ]
    return [problem for index in sorted(problems) for problem in problems[index]]


def _read_rounds(files: Sequence[RawFile]) -> list[list[int]]:
    """The indexes of `files` in rounds read at once (READ_ROUND_FILES, READ_ROUND_BYTES), in order."""
    rounds: list[list[int]] = []
    size = READ_ROUND_BYTES
    for index, file in enumerate(files):
        known = file.size if isinstance(file, StoredFile) else READ_ROUND_BYTES
        if not rounds or len(rounds[-1]) >= READ_ROUND_FILES or size + known > READ_ROUND_BYTES:
            rounds.append([])
            size = 0
        rounds[-1].append(index)
        size += known
    return rounds


def _evolve_table(
    warehouse: Warehouse,
    table: CdcTable,
    cache: FooterCache,
    result: EvolutionResult,
    group_rows,
    applied: Collection[str] = (),
    listed: Sequence[StoredFile] | None = None,
) -> None:
    group_rows[table.staging_model] = []
    if not is_listed_here(table.folder):
        log.info(
            "%s: raw files at %s are listed by Spark only: its columns come with dbt's on_schema_change",
            table.model,
            table.folder,
        )
        return
    files = raw_files(table.folder, table.producer, listed)
    if not files:
        log.info("%s: no raw file yet", table.model)
        return
    warehouse_columns = warehouse.columns(table.schema, table.identifier)
    found = inspect_table(table, files, cache, warehouse_columns, applied)
    for warning in found.ignored:
        log.warning("%s", warning)
    problems, plan, incoming = found.problems, found.plan, found.incoming
    if problems or plan is None or incoming is None or found.staged is None:
        result.problems.extend(problems)
        result.blocked_models.update({table.staging_model, table.model})
        log.error("%s: %d refused schema change(s); this table is not evolved nor built", table.model, len(problems))
        return
    union = found.staged
    # Logged first, then applied: a crash between leaves a logged change that the next run applies
    # (and does not log again), never an applied change without its log row.
    _write_log(warehouse, result.run_id, plan.changes)
    for change in plan.changes:
        log.info("%s: %s", table.model, change.sql())
        warehouse.execute(change.sql())
        result.applied.append(change)
        faults.point("during_schema_evolution", table.identifier)  # between two ALTERs
    if warehouse_columns is not None:
        result.columns[table.model] = [name for name, _ in warehouse_columns] + [
            change.column for change in plan.changes if change.action == "add_column"
        ]
    raw_types = {name.lower(): t for name, t in _spark_types(union)}
    groups = file_groups(table.folder, found.file_types, raw_types)
    # Files listed in groups are the only ones staging reads: an applied file changed in place is left out
    # of them (Spark would merge its footer into the staging view's schema, or fail on it), and registered
    # as left out (LEFT_OUT_GROUP) when Spark lists it (not of 0 bytes), so that the staging view does not
    # take it for a file that landed after the hooks (macros/cdc/landing.sql: cdc_landing_reads).
    if len(groups) > 1 or found.ignored:
        result.grouped.add(table.staging_model)
        log.info("%s: raw files hold %d type variants: staging reads them separately", table.model, len(groups))
        business_types = json.dumps(found.business_types)
        left_out = sorted(f.relative for f in files if str(f.location) in found.left_out and f.size > 0)
        group_rows[table.staging_model] = [(LEFT_OUT_GROUP, left_out, None)] if left_out else []
        schemas = {location(name).relative_to(table.folder): schema for name, schema in found.file_schemas.items()}
        for i, (is_open, group) in enumerate(groups):
            read_open = is_open and readable_as_table(group.values(), union.names)
            group_id = OPEN_GROUP if read_open else i
            group_rows[table.staging_model].append((group_id, list(group), business_types))
            signatures = {column_signature(schemas[f]) if f in schemas else None for f in group}
            merged = group_columns(signatures)
            if merged is not None:
                result.group_columns.setdefault(table.staging_model, {})[group_id] = merged
    # The open group's files are not in the view's SQL: only that it exists.
    view_groups = [(g, "open" if g == OPEN_GROUP else f, t) for g, f, t in group_rows[table.staging_model]]
    result.staging_inputs[table.staging_model] = json.dumps(
        [union.to_string(show_field_metadata=False, show_schema_metadata=False), view_groups]
    )


def column_signature(schema: pa.Schema) -> str:
    """A file's column names in its order and its struct columns' fields (footers.py: struct_fields), as JSON."""
    return json.dumps([schema.names, struct_fields(schema)])


def group_columns(signatures: Collection[str | None]) -> dict | None:
    """The raw columns and struct fields of a group of files (`signatures`: each file's `column_signature`,
    from Inspection.file_schemas), as Spark merges its files' footers (spark.sql.parquet.mergeSchema): every column any
    file names, once each, and a struct column's fields when every file that holds it names the same ones in the same
    order (the files of a group have one type per column: a struct with another field is another group). None when
    a footer was not read, two spellings of a name differ only in case, or a struct's fields differ. A group is always
    read with its column types (macros/cdc/landing.sql: cdc_cast_columns), so the columns' order does not matter."""
    if not signatures or None in signatures:
        return None
    names: list[str] = []
    fields: dict[str, list[str]] = {}
    for signature in sorted(signatures):
        file_names, file_fields = json.loads(signature)
        names += [name for name in file_names if name not in names]
        for column, found in file_fields.items():
            if fields.setdefault(column, found) != found:
                return None
    if len({name.lower() for name in names}) != len(names):
        return None
    return {"raw_columns": names, "raw_fields": fields}


def _spark_types(schema) -> Iterable[tuple[str, str]]:
    for column in schema:
        try:
            spark_name = spark_type(column.type)
        except ValueError:
            continue
        if spark_name:
            yield column.name, spark_name


def _write_log(warehouse: Warehouse, run_id: str, changes) -> None:
    """One row per change in `schema_evolution_log`, unless the same change (table, column, action,
    types) is already there: a run that died between logging and applying it logged it."""
    if not changes:
        return
    log_table = quoted_relation(warehouse.meta_schema, SCHEMA_EVOLUTION_LOG)
    rows = ", ".join(
        f"({_text(run_id)}, {_text(c.table)}, {_text(c.column)}, {_text(c.action)}, "
        f"{_text(c.old_type)}, {_text(c.new_type)}, current_timestamp())"
        for c in changes
    )
    same = " and ".join(
        f"logged.{c} <=> change.{c}" for c in ("table_name", "column_name", "action", "old_type", "new_type")
    )
    warehouse.execute(
        f"insert into {log_table} select change.* from (values {rows})"
        " as change(run_id, table_name, column_name, action, old_type, new_type, applied_at)"
        f" left anti join {log_table} as logged on {same}"
    )


# The file groups' rows as of one snapshot of cdc_raw_file_groups, kept in the hooks' state folder: a run reads the
# table only after a commit to it (project/warehouse.py: keep), like the ledger (landing/pending.py).
GROUPS_CACHE = "raw_file_groups_cache.json"


def _existing_groups(warehouse: Warehouse, relation: str, cache: Path) -> dict[str, list[tuple]]:
    """Per staging model, its rows of cdc_raw_file_groups: none before the table's first commit, the cached ones
    while its newest snapshot is the one they were read at, else read (and cached)."""
    snapshots = warehouse.meta_snapshots()
    if RAW_FILE_GROUPS in snapshots and snapshots[RAW_FILE_GROUPS] is None:
        return {}  # never written
    snapshot = snapshots.get(RAW_FILE_GROUPS)
    kept = read_kept(cache, relation, snapshot)
    try:
        if kept is not None:
            return {m: [(int(g), list(f), t) for g, f, t in rows] for m, rows in kept.items()}
    except (ValueError, TypeError, AttributeError):  # damaged: read the table
        pass
    existing: dict[str, list[tuple]] = {}
    for staging_model, group_id, files, types in warehouse.query(
        f"select staging_model, group_id, to_json(file_names), column_types from {relation} order by group_id"
    ):
        existing.setdefault(staging_model, []).append((int(group_id), json.loads(files), types))
    if snapshot is not None:
        keep(cache, relation, snapshot, existing)
    return existing


def _write_groups(
    warehouse: Warehouse, group_rows: dict[str, list[tuple[int, list[str], str | None]]], state_dir: Path
) -> None:
    """Replace, per staging model, the file groups staging must read separately (only what changed:
    a run with no new file writes nothing), for every changed model in one statement and one commit: a
    grouped folder's open group gains the files that land, so its rows change at each run that brings
    some (a DELETE and an INSERT per model were 0.6 s of a live run's hooks for two tables)."""
    if not group_rows:  # no table was looked at (nothing new anywhere): nothing to compare
        return
    relation = quoted_relation(warehouse.meta_schema, RAW_FILE_GROUPS)
    existing = _existing_groups(warehouse, relation, state_dir / GROUPS_CACHE)
    changed = {model: rows for model, rows in group_rows.items() if existing.get(model, []) != rows}
    if not changed:
        return
    models = ", ".join(_text(model) for model in sorted(changed))
    values = ", ".join(
        f"({_text(model)}, {group_id}, array({', '.join(_text(f) for f in files)}), {_text(types)})"
        for model, rows in changed.items()
        for group_id, files, types in rows
    )
    if not values:  # every changed model has no group left: its rows go
        warehouse.execute(f"delete from {relation} where staging_model in ({models})")
        return
    warehouse.execute(
        f"merge into {relation} as t using (select cast(staging_model as string) as staging_model,"
        " cast(group_id as int) as group_id, cast(file_names as array<string>) as file_names,"
        f" cast(column_types as string) as column_types from values {values}"
        " as v(staging_model, group_id, file_names, column_types)) as s"
        " on t.staging_model = s.staging_model and t.group_id = s.group_id"
        " when matched then update set t.file_names = s.file_names, t.column_types = s.column_types"
        " when not matched then insert (staging_model, group_id, file_names, column_types)"
        " values (s.staging_model, s.group_id, s.file_names, s.column_types)"
        f" when not matched by source and t.staging_model in ({models}) then delete"
    )
