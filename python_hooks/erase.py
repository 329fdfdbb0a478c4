"""Right to be forgotten: erase a data subject from the whole lakehouse (`python -m python_hooks erase`).

Where a subject lives is declared once, in dbt yml `meta` (no second list to keep in sync):

    sources:  meta: {cdc_subjects: {customer: id}}            the raw files, staging, the current state
    models / snapshots:  config: {meta: {cdc_subjects: {customer: customer_id}}}

A current-state model holds the subjects of its source (same column names); any other table model,
incremental model or snapshot declares its own. Views hold no data.

An erasure, in this order (each step can be run again: erasing the same keys twice is safe):

1. checks, before any write: the secret (CDC_ERASURE_SECRET) is set and the warehouse sees the same
   one, every declared column exists;
2. the register (`<schema>_cdc_meta.erasure_register`) gets the keyed hash of each key: from then on
   staging leaves out every change event of the subject (macros/cdc/erasure.sql), so a late file, a
   re-delivered file or a --full-refresh never brings it back, even while this erasure runs;
3. the raw landing files holding the subject are rewritten without its rows (the new file is written
   beside the old one under a hidden name, then renamed over it: same name, so the ledger still
   counts it as applied and it is not a new delivery);
4. every table holding the subject loses its rows (a DELETE by keyed hash: no key enters the SQL),
   the tombstones of its keys go too, and the data files that held them are rewritten;
5. every snapshot older than the erasure is expired (Iceberg deletes the files only they used) and
   orphan files past the safety interval are removed;
6. `erasure_log` gets one row: when, subject, hashed keys, reason, tables, rows, raw files, snapshots
   and files. No key and no personal value is logged anywhere.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import os
import re
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from python_hooks.evolve import landing_files
from python_hooks.maintain import TABLE_MATERIALIZATIONS
from python_hooks.schema_plan import quote_ident, sql_string
from python_hooks.warehouse import Warehouse

log = logging.getLogger(__name__)

SECRET_ENV = "CDC_ERASURE_SECRET"
# The secret is substituted into SQL string literals by Spark (`${env:...}`): no quote, backslash or brace.
SECRET_PATTERN = re.compile(r"^[A-Za-z0-9_+/=.:-]{16,}$")
CHECK_SUBJECT, CHECK_KEY = "*", "register-check"  # macros/cdc/erasure.sql: cdc_erasure_check_value


class ErasureError(RuntimeError):
    """A refused erasure: nothing was written."""


def subject_hash(secret: str, subject: str, key: str) -> str:
    """The keyed hash of a subject key, as macros/cdc/erasure.sql computes it in SQL."""
    return hashlib.sha256(f"{secret}|{subject}|{key}".encode()).hexdigest()


def hash_sql(subject: str, value_sql: str) -> str:
    """The same hash in Spark SQL; the secret stays an environment reference in the text."""
    return f"sha2(concat('${{env:{SECRET_ENV}}}', '|', {sql_string(subject)}, '|', cast({value_sql} as string)), 256)"


def secret_from_env() -> str:
    secret = os.environ.get(SECRET_ENV, "")
    if not secret:
        raise ErasureError(
            f"{SECRET_ENV} is not set: erasure keeps a keyed hash of each key, never the key; set it to a secret of "
            "16 or more characters (letters, digits, _ + / = . : -) and keep it: every later run needs the same one"
        )
    if not SECRET_PATTERN.match(secret):
        raise ErasureError(f"{SECRET_ENV} must be 16 or more characters of letters, digits and _ + / = . : -")
    return secret


@dataclass(frozen=True)
class Holder:
    """A place that holds a subject: a table (schema, identifier) or a raw landing folder."""

    name: str  # model, snapshot or source (source_name.table)
    column: str
    schema: str = ""
    identifier: str = ""
    folder: Path | None = None
    producer: str = ""  # raw folders: dms | debezium_flat | debezium_envelope
    tombstone_model: str = ""  # a current-state model keyed by the subject's column: its tombstones go too

    @property
    def relation(self) -> str:
        return f"{quote_ident(self.schema)}.{quote_ident(self.identifier)}"


def _subjects(meta: dict | None) -> dict[str, str]:
    subjects = (meta or {}).get("cdc_subjects") or {}
    if not isinstance(subjects, dict):
        raise ErasureError(f"meta.cdc_subjects must map a subject to its key column, not {subjects!r}")
    return {str(s): str(c) for s, c in subjects.items()}


def holders(manifest, subject: str) -> tuple[list[Holder], list[Holder]]:
    """(tables, raw folders) that hold `subject`, from the manifest's `meta.cdc_subjects`."""
    from python_hooks.evolve import cdc_tables

    raw: list[Holder] = []
    for source in manifest.sources.values():
        column = _subjects(source.meta).get(subject)
        if column:
            meta = {**source.source_meta, **source.meta}
            producer = "dms"
            if meta.get("cdc_producer") == "debezium":
                producer = "debezium_envelope" if meta.get("debezium_shape") == "envelope" else "debezium_flat"
            raw.append(
                Holder(f"{source.source_name}.{source.name}", column, folder=Path(source.identifier), producer=producer)
            )
    inherited = {}
    for table in cdc_tables(manifest):
        source = next(
            s for s in manifest.sources.values() if s.source_name == table.source_name and s.name == table.table_name
        )
        column = _subjects(source.meta).get(subject)
        if column:
            inherited[table.model] = column.lower()
    tables: list[Holder] = []
    for node in manifest.nodes.values():
        if node.resource_type not in ("model", "snapshot"):
            continue
        if node.config.materialized not in TABLE_MATERIALIZATIONS:
            continue
        column = (
            _subjects(node.config.meta).get(subject) or _subjects(node.meta).get(subject) or inherited.get(node.name)
        )
        if not column:
            continue
        unique_key = node.config.get("unique_key")
        keys = [unique_key] if isinstance(unique_key, str) else list(unique_key or [])
        keyed = node.config.get("incremental_strategy") == "cdc_merge" and [k.lower() for k in keys] == [column.lower()]
        tables.append(
            Holder(
                node.name,
                column,
                schema=node.schema,
                identifier=node.alias or node.name,
                tombstone_model=(node.alias or node.name) if keyed else "",
            )
        )
    return sorted(tables, key=lambda h: h.name), sorted(raw, key=lambda h: h.name)


# ------------------------------------------------------------------ raw landing files


def _subject_mask(table, column: str, keys: Sequence[str], producer: str):
    """True for the rows of an Arrow table whose subject column (any case; in a Debezium envelope, in
    `before` or `after`) is one of `keys`."""
    import pyarrow as pa
    import pyarrow.compute as pc

    wanted = pa.array(list(keys), type=pa.string())
    by_lower = {name.lower(): name for name in table.column_names}
    values = []
    if column.lower() in by_lower:
        values.append(table.column(by_lower[column.lower()]))
    if producer == "debezium_envelope":
        for image in ("before", "after"):
            if image in by_lower and pa.types.is_struct(table.schema.field(by_lower[image]).type):
                struct = table.column(by_lower[image])
                fields = {f.name.lower(): f.name for f in struct.type}
                if column.lower() in fields:
                    values.append(pc.struct_field(struct, fields[column.lower()]))
    mask = None
    for value in values:
        hit = pc.fill_null(pc.is_in(pc.cast(value, pa.string()), value_set=wanted), False)
        mask = hit if mask is None else pc.or_(mask, hit)
    return mask


def scrub_raw_file(path: Path, column: str, keys: Sequence[str], producer: str) -> int:
    """Rewrites one raw file without the subject's rows; returns how many rows went (0: untouched).
    The new file is written under a hidden name in the same folder (which no reader lists), then
    renamed over the old one: a reader sees the old file or the new one, never half of one."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    source = pq.ParquetFile(path)
    table = source.read()
    mask = _subject_mask(table, column, keys, producer)
    removed = 0 if mask is None else pc.sum(mask).as_py() or 0
    if not removed:
        return 0
    kept = table.filter(pc.invert(mask))
    compression = source.metadata.row_group(0).column(0).compression if source.metadata.num_row_groups else "snappy"
    staged = path.with_name(f".{path.name}.erasing")
    pq.write_table(kept, staged, compression=compression.lower() if compression != "UNCOMPRESSED" else "none")
    with open(staged, "rb") as handle:
        os.fsync(handle.fileno())
    os.replace(staged, path)
    return removed


# ------------------------------------------------------------------ the erasure


@dataclass
class ErasureReport:
    run_id: str
    subject: str
    key_hashes: list[str]
    target: str = ""
    rows: dict[str, int] = field(default_factory=dict)  # table (or raw source) -> rows removed
    raw_files: list[str] = field(default_factory=list)
    snapshots_expired: int = 0
    files_removed: int = 0
    refs_kept: list[str] = field(default_factory=list)  # tags/branches that still reach older snapshots
    seconds: float = 0.0

    @property
    def tables_touched(self) -> list[str]:
        return sorted(name for name, rows in self.rows.items() if rows and not name.startswith("raw "))


def _check_secret_in_warehouse(warehouse: Warehouse, secret: str) -> None:
    """The warehouse (the Spark driver: this process, or the cluster's Thrift Server) must see the same secret."""
    seen = warehouse.query(f"select {hash_sql(CHECK_SUBJECT, sql_string(CHECK_KEY))}")[0][0]
    if seen != subject_hash(secret, CHECK_SUBJECT, CHECK_KEY):
        raise ErasureError(
            f"the warehouse of target {warehouse.target} does not see this {SECRET_ENV} (on the cluster target the "
            "Thrift Server needs it in the environment of `make cluster-up`); nothing was erased"
        )


def _check_columns(warehouse: Warehouse, tables: Iterable[Holder]) -> list[Holder]:
    """The holders whose table exists; refuses a declared column the table does not have."""
    existing = []
    for holder in tables:
        columns = warehouse.columns(holder.schema, holder.identifier)
        if columns is None:
            log.info("erase: %s (%s) does not exist yet: nothing to erase there", holder.name, holder.relation)
            continue
        if holder.column.lower() not in {name.lower() for name, _ in columns}:
            raise ErasureError(
                f"{holder.name} ({holder.schema}.{holder.identifier}) has no column {holder.column!r}, declared as "
                "its subject key in meta.cdc_subjects; nothing was erased"
            )
        existing.append(holder)
    return existing


def _register(warehouse: Warehouse, subject: str, hashes: Sequence[str], secret: str) -> None:
    register = f"{quote_ident(warehouse.meta_schema)}.erasure_register"
    rows = [(CHECK_SUBJECT, subject_hash(secret, CHECK_SUBJECT, CHECK_KEY))] + [(subject, h) for h in hashes]
    values = ", ".join(f"({sql_string(s)}, {sql_string(h)})" for s, h in rows)
    warehouse.execute(
        f"insert into {register} select new.subject, new.key_hash, current_timestamp()"
        f" from (values {values}) as new(subject, key_hash)"
        f" left anti join {register} as old on old.subject = new.subject and old.key_hash = new.key_hash"
    )


def _expire(warehouse: Warehouse, relation: str, report: ErasureReport, since: dt.datetime) -> None:
    """Every snapshot of the table older than `since` goes, with the data and metadata files only they
    used (Iceberg's expire_snapshots deletes them), then the orphan files (python_hooks/maintain.py)."""
    from python_hooks import maintain

    result = maintain.expire_snapshots(warehouse, relation, older_than=since, retain_last=1)
    report.snapshots_expired += result.snapshots_expired
    report.files_removed += result.files_deleted
    report.files_removed += _remove_orphans(warehouse, relation, since)
    for name, kind in warehouse.query(f"select name, type from {relation}.refs where name <> 'main'"):
        report.refs_kept.append(f"{relation} {kind.lower()} {name}")


def _remove_orphans(warehouse: Warehouse, relation: str, since: dt.datetime) -> int:
    """Files under the table's location that no snapshot refers to: the leftovers of writes that never
    committed, or of a table dropped without purge, which may hold the subject's rows too.
    On the embedded target this process is the warehouse's only writer (python_hooks/embedded_lock.py),
    so every orphan goes, through Iceberg's action (its SQL procedure refuses an interval under 24 h).
    On a shared target a run writing now would lose its files: only orphans past the safety interval
    go, and `make maintain` removes the rest once they pass it."""
    from python_hooks import maintain

    if warehouse.target != "local":
        return maintain.remove_orphan_files(warehouse, relation, since - maintain.ORPHAN_INTERVAL)
    from pyspark.sql import SparkSession

    session = SparkSession.getActiveSession() or SparkSession.builder.getOrCreate()  # dbt's session
    iceberg = session._jvm.org.apache.iceberg.spark
    table = iceberg.Spark3Util.loadIcebergTable(session._jsparkSession, relation)
    action = iceberg.actions.SparkActions.get(session._jsparkSession).deleteOrphanFiles(table)
    removed = action.olderThan(int(since.timestamp() * 1000)).execute().orphanFileLocations().iterator()
    count = 0
    while removed.hasNext():
        log.debug("erase: %s: removed orphan file %s", relation, removed.next())
        count += 1
    return count


def erase(
    warehouse: Warehouse, manifest, subject: str, keys: Sequence[str], reason: str, secret: str | None = None
) -> ErasureReport:
    """Erases the subject keys `keys` everywhere; raises ErasureError before any write when it cannot."""
    started = time.monotonic()
    started_at = dt.datetime.now(dt.timezone.utc)
    secret = secret or secret_from_env()
    keys = sorted({str(k).strip() for k in keys if str(k).strip()})
    if not keys:
        raise ErasureError("no key to erase (--key)")
    if not reason.strip():
        raise ErasureError("--reason is required: the erasure log records why (e.g. a request's reference)")
    tables, raw = holders(manifest, subject)
    if not tables and not raw:
        raise ErasureError(
            f"subject {subject!r} is declared nowhere: add meta.cdc_subjects {{{subject}: <key column>}} to the "
            "sources and models that hold it"
        )
    hashes = [subject_hash(secret, subject, k) for k in keys]
    report = ErasureReport(run_id=uuid.uuid4().hex, subject=subject, key_hashes=hashes, target=warehouse.target)
    # 1. checks, before any write
    _check_secret_in_warehouse(warehouse, secret)
    tables = _check_columns(warehouse, tables)
    for holder in raw:
        if "://" in str(holder.folder) and not str(holder.folder).startswith("file:"):
            raise ErasureError(
                f"{holder.name}: raw files at {holder.folder} are not on a local file system; this erasure rewrites "
                "local landing folders only. Nothing was erased"
            )
    # 2. the register: from now on staging leaves the subject out
    _register(warehouse, subject, hashes, secret)
    log.info("erase: %d key(s) of subject %s registered (keyed hashes)", len(hashes), subject)
    # 3. raw files
    for holder in raw:
        removed = 0
        for path in sorted(landing_files(holder.folder)) if holder.folder.exists() else []:
            rows = scrub_raw_file(path, holder.column, keys, holder.producer)
            if rows:
                removed += rows
                report.raw_files.append(path.relative_to(holder.folder).as_posix())
        report.rows[f"raw {holder.name}"] = removed
        log.info("erase: raw files of %s: %d row(s) removed", holder.name, removed)
    # 4. tables and tombstones
    hash_list = ", ".join(sql_string(h) for h in hashes)
    touched: list[str] = []
    for holder in tables:
        condition = f"{hash_sql(subject, quote_ident(holder.column))} in ({hash_list})"
        count = warehouse.query(f"select count(*) from {holder.relation} where {condition}")[0][0]
        report.rows[holder.name] = count
        if count:
            warehouse.execute(f"delete from {holder.relation} where {condition}")
            touched.append(holder.relation)
        log.info("erase: %s: %d row(s) removed", holder.name, count)
    tombstones = f"{quote_ident(warehouse.meta_schema)}.cdc_tombstones"
    tombstone_total = 0
    for holder in tables:
        if not holder.tombstone_model or not warehouse.table_exists(warehouse.meta_schema, "cdc_tombstones"):
            continue
        value = f"get_json_object(key_json, {sql_string('$.' + holder.column)})"
        condition = f"model_name = {sql_string(holder.tombstone_model)} and {hash_sql(subject, value)} in ({hash_list})"
        count = warehouse.query(f"select count(*) from {tombstones} where {condition}")[0][0]
        if count:
            warehouse.execute(f"delete from {tombstones} where {condition}")
            tombstone_total += count
    if tombstone_total:
        report.rows["cdc_tombstones"] = tombstone_total
        touched.append(tombstones)
    # The deleted rows may still be in data files behind merge-on-read position deletes: rewrite those files.
    for relation in touched:
        name = relation.replace("`", "")
        warehouse.query(
            f"call spark_catalog.system.rewrite_data_files(table => {sql_string(name)},"
            " options => map('delete-file-threshold', '1'))"
        )
        warehouse.query(f"call spark_catalog.system.rewrite_position_delete_files(table => {sql_string(name)})")
    # 5. history: every snapshot older than now, and the files only they used, of every table that holds
    #    the subject (also those with no row of it left today: their older snapshots may have some)
    since = dt.datetime.now(dt.timezone.utc)
    expired = [holder.relation for holder in tables]
    if tombstone_total or any(h.tombstone_model for h in tables):
        expired.append(tombstones)
    for relation in expired:
        _expire(warehouse, relation, report, since)
    report.seconds = time.monotonic() - started
    _log(warehouse, report, reason, started_at)
    return report


def _log(warehouse: Warehouse, report: ErasureReport, reason: str, started_at: dt.datetime) -> None:
    def array(values: Iterable[str]) -> str:
        items = ", ".join(sql_string(v) for v in values)
        return f"array({items})" if items else "cast(array() as array<string>)"

    rows = ", ".join(f"{sql_string(k)}, cast({v} as bigint)" for k, v in sorted(report.rows.items()))
    rows_map = f"map({rows})" if rows else "cast(map() as map<string, bigint>)"
    warehouse.execute(
        f"insert into {quote_ident(warehouse.meta_schema)}.erasure_log select {sql_string(report.run_id)}, 'erase',"
        f" {sql_string(report.subject)}, {array(report.key_hashes)}, {sql_string(reason)},"
        f" cast({sql_string(started_at.strftime('%Y-%m-%d %H:%M:%S'))} as timestamp), current_timestamp(),"
        f" {array(report.tables_touched)}, {rows_map}, {array(report.raw_files)},"
        f" {report.snapshots_expired}, {report.files_removed}"
    )


def summary(report: ErasureReport) -> list[str]:
    """What an erasure did, in a few lines for its user (no key, no personal value)."""
    tables = {name: rows for name, rows in report.rows.items() if not name.startswith("raw ")}
    raw = {name[4:]: rows for name, rows in report.rows.items() if name.startswith("raw ")}
    lines = [
        f"erased {len(report.key_hashes)} {report.subject} key(s) on target {report.target} in {report.seconds:.1f} s"
        f" (erasure_log run_id {report.run_id})",
        "  tables: " + (", ".join(f"{n} {r}" for n, r in sorted(tables.items()) if r) or "no row held") + " row(s)",
        f"  raw files rewritten: {len(report.raw_files)} ("
        + (", ".join(f"{n} {r}" for n, r in sorted(raw.items()) if r) or "no row held")
        + " row(s))",
        f"  snapshots expired: {report.snapshots_expired}, files removed: {report.files_removed}",
    ]
    for ref in report.refs_kept:
        lines.append(f"  WARNING: {ref} keeps older snapshots, which may still hold the erased rows: drop it")
    return lines
