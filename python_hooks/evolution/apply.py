"""Schema evolution of the current-state Iceberg tables, run before dbt (`python -m python_hooks evolve`).

For every current-state model of the dbt project (incremental_strategy `cdc_merge`; found in the
manifest, through its staging model, to the source and its landing folder) it:

1. reads the union schema of the table's raw files from their Parquet footers, only for files it
   has not read before (`FooterCache`, kept in `$CDC_WAREHOUSE/_python_hooks/`);
2. reads the Iceberg table's schema (a missing table is "not created yet": dbt creates it);
3. plans (`schema_plan.plan_schema_changes`): columns to add, promotions to apply, refusals;
4. logs each change of the plan in `schema_evolution_log`, then applies it with quoted identifiers;
5. when raw files disagree on a column's type (an int column now sent as bigint), records which
   files Spark must read with which types (`cdc_raw_file_groups`), so that staging reads each
   group on its own and casts to the promoted type (Spark cannot read both in one relation).

A table with a refused change or an unreadable file is left as it is and reported; the others go
on. `blocked_models` lists what dbt must not build this run.
"""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from python_hooks import faults
from python_hooks.footers import FooterCache, FooterReadError
from python_hooks.schema_plan import (
    DEFAULT_TIMESTAMP_COLUMN,
    ColumnChange,
    Refusal,
    business_schema,
    plan_schema_changes,
    quote_ident,
    sql_string,
)
from python_hooks.warehouse import Warehouse

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CdcTable:
    """A current-state model and where its raw files are."""

    model: str
    schema: str
    identifier: str
    staging_model: str
    source: str
    folder: Path
    producer: str  # dms | debezium_flat | debezium_envelope
    timestamp_column: str | None
    source_name: str = ""
    table_name: str = ""
    landing: str = ""  # the source identifier as written (a path or a URI)
    keys: tuple[str, ...] = ()  # the model's unique_key columns

    @property
    def probe(self) -> str:
        """The binaryFile table that lists the folder (macros/cdc/landing.sql: cdc_landing_probe)."""
        folder = self.landing.rstrip("/")
        return f"landing__{self.source_name}__{self.table_name}__{hashlib.md5(folder.encode()).hexdigest()[:8]}"


@dataclass
class EvolutionResult:
    run_id: str
    applied: list[ColumnChange] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    blocked_models: set[str] = field(default_factory=set)

    @property
    def ok(self) -> bool:
        return not self.problems


def cdc_tables(manifest) -> list[CdcTable]:
    """The project's current-state models, from the dbt manifest (no second list to keep in sync)."""
    tables = []
    for node in manifest.nodes.values():
        if node.resource_type != "model" or node.config.get("incremental_strategy") != "cdc_merge":
            continue
        parents = [manifest.nodes[n] for n in node.depends_on.nodes if n in manifest.nodes]
        staging = next((p for p in parents if any(s in manifest.sources for s in p.depends_on.nodes)), None)
        if staging is None:
            log.warning("%s: no staging model reading a source: skipped", node.name)
            continue
        source = manifest.sources[next(s for s in staging.depends_on.nodes if s in manifest.sources)]
        meta = {**source.source_meta, **source.meta}
        if meta.get("cdc_producer") == "debezium":
            producer = "debezium_envelope" if meta.get("debezium_shape") == "envelope" else "debezium_flat"
            timestamp_column = None
        else:
            producer = "dms"
            timestamp_column = meta.get("dms_timestamp_column", DEFAULT_TIMESTAMP_COLUMN)
        tables.append(
            CdcTable(
                model=node.name,
                schema=node.schema,
                identifier=node.alias or node.name,
                staging_model=staging.name,
                source=f"{source.source_name}.{source.name}",
                folder=Path(source.identifier),
                producer=producer,
                timestamp_column=timestamp_column,
                source_name=source.source_name,
                table_name=source.name,
                landing=source.identifier,
                keys=_key_columns(node.config.get("unique_key")),
            )
        )
    return sorted(tables, key=lambda t: t.model)


def _key_columns(unique_key) -> tuple[str, ...]:
    if not unique_key:
        return ()
    if isinstance(unique_key, str):
        return tuple(k.strip() for k in unique_key.split(","))
    return tuple(unique_key)


def missing_keys(table: CdcTable, file_types: dict[str, dict[str, str]]) -> list[str]:
    """One message per raw file that lacks a key column (case-insensitive) of a DMS or flattened
    Debezium table (an envelope holds its keys inside `before`/`after`): its events could be matched
    to no row, and Spark could not even resolve the column in a batch of such files alone."""
    if table.producer == "debezium_envelope" or not table.keys:
        return []
    problems = []
    for file, types in sorted(file_types.items()):
        missing = [k for k in table.keys if k.lower() not in types]
        if missing:
            problems.append(
                f"raw file {file} has no key column {', '.join(repr(k) for k in missing)} (unique_key of model"
                f" {table.model}): its changes cannot be applied; fix the producer and replace the file"
                f" [model {table.model}, source {table.source}]"
            )
    return problems


def landing_files(folder: Path) -> list[Path]:
    """The raw Parquet files of a landing folder: directly in it or in subfolders (DMS's
    DatePartitionEnabled <yyyy>/<mm>/<dd>/, the S3 sink's partition=<p>/). Hidden files and folders
    (. or _) are not raw files, as for Spark."""
    return [
        p
        for p in folder.rglob("*.parquet")
        if not any(part.startswith((".", "_")) for part in p.relative_to(folder).parts)
    ]


def raw_files(table: CdcTable) -> list[Path]:
    """The table's raw Parquet files, oldest first (DMS full load, then CDC files by name, whatever their subfolder)."""
    files = landing_files(table.folder)

    def age(path: Path) -> tuple:
        if table.producer == "dms":
            return (not path.name.startswith("LOAD"), path.name)
        # <topic>+<partition>+<start offset>.snappy.parquet
        parts = path.name.split("+")
        return (int(parts[-1].split(".")[0]) if len(parts) >= 3 else 0, path.name)

    return sorted(files, key=age)


def file_groups(folder: Path, file_types: dict[str, dict[str, str]], union: dict[str, str]) -> list[list[str]]:
    """Files grouped so that within a group every column has one type. One group: nothing to record."""
    groups: dict[tuple, list[str]] = {}
    for name, types in sorted(file_types.items()):
        signature = tuple(sorted((c, t) for c, t in types.items() if c in union and t not in (union[c], "null")))
        groups.setdefault(signature, []).append(Path(name).relative_to(folder).as_posix())
    return [groups[k] for k in sorted(groups)]


def _refusal_message(refusal: Refusal, table: CdcTable) -> str:
    return f"{refusal.message()} [model {table.model}, source {table.source}]"


def evolve(
    warehouse: Warehouse, manifest, state_dir: Path, run_id: str | None = None, skip: Iterable[str] = ()
) -> EvolutionResult:
    """`skip`: models with nothing new to apply (pipeline.idle_models): every raw file of theirs is
    applied, so their tables already hold every column of those files; they are not looked at."""
    result = EvolutionResult(run_id=run_id or str(uuid.uuid4()))
    cache = FooterCache(Path(state_dir) / "footer_cache.json")
    group_rows: dict[str, list[tuple[int, list[str], str]]] = {}
    skipped = set(skip)
    for table in cdc_tables(manifest):
        if table.model in skipped:
            continue
        try:
            _evolve_table(warehouse, table, cache, result, group_rows)
        except FooterReadError as error:
            result.problems.append(f"{table.model} (source {table.source}): {error}. The table was not changed.")
            result.blocked_models.update({table.staging_model, table.model})
    cache.save()
    _write_groups(warehouse, group_rows)
    return result


def _evolve_table(
    warehouse: Warehouse, table: CdcTable, cache: FooterCache, result: EvolutionResult, group_rows
) -> None:
    files = raw_files(table)
    group_rows[table.staging_model] = []
    if not files:
        log.info("%s: no raw file yet", table.model)
        return
    key = str(table.folder)
    union = cache.union_schema(key, files)
    problems = [f"{conflict.message()} [model {table.model}, source {table.source}]" for conflict in union.conflicts]
    problems += missing_keys(table, cache.file_types(key))
    incoming = business_schema(union.schema, table.producer, table.timestamp_column)
    relation = f"{quote_ident(table.schema)}.{quote_ident(table.identifier)}"
    current = warehouse.columns(table.schema, table.identifier)
    plan = plan_schema_changes(relation, current, incoming, table.timestamp_column)
    problems += [_refusal_message(refusal, table) for refusal in plan.refusals]
    if problems:
        result.problems.extend(problems)
        result.blocked_models.update({table.staging_model, table.model})
        log.error("%s: %d refused schema change(s); this table is not evolved nor built", table.model, len(problems))
        return
    # Logged first, then applied: a crash between leaves a logged change that the next run applies
    # (and does not log again), never an applied change without its log row.
    _write_log(warehouse, result.run_id, plan.changes)
    for change in plan.changes:
        log.info("%s: %s", table.model, change.sql())
        warehouse.execute(change.sql())
        result.applied.append(change)
        faults.point("during_schema_evolution", table.identifier)  # between two ALTERs
    raw_types = {name.lower(): t for name, t in _spark_types(union.schema)}
    groups = file_groups(table.folder, cache.file_types(key), raw_types)
    if len(groups) > 1:
        log.info("%s: raw files hold %d type variants: staging reads them separately", table.model, len(groups))
        business_types = json.dumps({name.lower(): t for name, t in _spark_types(incoming)})
        group_rows[table.staging_model] = [(i, g, business_types) for i, g in enumerate(groups)]


def _spark_types(schema) -> Iterable[tuple[str, str]]:
    from python_hooks.schema_plan import spark_type

    for column in schema:
        try:
            spark_name = spark_type(column.type)
        except ValueError:
            continue
        if spark_name:
            yield column.name, spark_name


def _sql_string(value: str | None) -> str:
    if value is None:
        return "cast(null as string)"
    return sql_string(value)


def _write_log(warehouse: Warehouse, run_id: str, changes) -> None:
    """One row per change in `schema_evolution_log`, unless the same change (table, column, action,
    types) is already there: a run that died between logging and applying it logged it."""
    if not changes:
        return
    log_table = f"{quote_ident(warehouse.meta_schema)}.schema_evolution_log"
    rows = ", ".join(
        f"({_sql_string(run_id)}, {_sql_string(c.table)}, {_sql_string(c.column)}, {_sql_string(c.action)}, "
        f"{_sql_string(c.old_type)}, {_sql_string(c.new_type)}, current_timestamp())"
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


def _write_groups(warehouse: Warehouse, group_rows: dict[str, list[tuple[int, list[str], str]]]) -> None:
    """Replace, per staging model, the file groups staging must read separately (only what changed:
    a run with no new file writes nothing)."""
    relation = f"{quote_ident(warehouse.meta_schema)}.cdc_raw_file_groups"
    existing: dict[str, list[tuple[int, list[str], str]]] = {}
    for staging_model, group_id, files, types in warehouse.query(
        f"select staging_model, group_id, to_json(file_names), column_types from {relation} order by group_id"
    ):
        existing.setdefault(staging_model, []).append((int(group_id), json.loads(files), types))
    for staging_model, rows in group_rows.items():
        if existing.get(staging_model, []) == rows:
            continue
        if staging_model in existing:
            warehouse.execute(f"delete from {relation} where staging_model = {_sql_string(staging_model)}")
        if rows:
            values = ", ".join(
                f"({_sql_string(staging_model)}, {group_id}, array({', '.join(_sql_string(f) for f in files)}), "
                f"{_sql_string(types)})"
                for group_id, files, types in rows
            )
            warehouse.execute(f"insert into {relation} values {values}")
