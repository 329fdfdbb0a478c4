"""Personal data: erase a data subject from the whole lakehouse (`python -m python_hooks erase`), or
rectify its personal columns (`python -m python_hooks rectify`).

Where a subject lives is declared once, in dbt yml `meta` (no second list to keep in sync):

    sources:  meta: {cdc_subjects: {customer: id}, cdc_personal_data: {customer: [name]}}
    models / snapshots:  config: {meta: {cdc_subjects: {customer: customer_id},
                                         cdc_personal_data: {customer: {name: sales_customer_name}}}}

`cdc_subjects` names the column holding the subject's key; `cdc_personal_data` the personal columns a
rectification may change, as a list, or as a mapping from the source's column name (what `--set`
names) to the model's own. A current-state model holds the subjects and personal columns of its
source (same column names); any other table model, incremental model or snapshot declares its own.
Views hold no data.

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

A rectification takes the same steps with values instead of rows: the rectification register gets,
per (subject, column, key, old value) found in a table or raw file, the keyed hash of the old value
and the correction, which staging substitutes (so no late or re-delivered event brings an old value
back, while a value the source changes later passes); raw files, then every table's rows of the key
get the correction (a null stays null); older snapshots and orphan files go.
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
    personal: tuple[tuple[str, str], ...] = ()  # (attribute, column): meta.cdc_personal_data

    @property
    def personal_columns(self) -> dict[str, str]:
        """{attribute (the source's column name, as `--set` names it): this table's column}."""
        return dict(self.personal)

    @property
    def relation(self) -> str:
        return f"{quote_ident(self.schema)}.{quote_ident(self.identifier)}"


def _subjects(meta: dict | None) -> dict[str, str]:
    subjects = (meta or {}).get("cdc_subjects") or {}
    if not isinstance(subjects, dict):
        raise ErasureError(f"meta.cdc_subjects must map a subject to its key column, not {subjects!r}")
    return {str(s): str(c) for s, c in subjects.items()}


def _personal(meta: dict | None, subject: str) -> tuple[tuple[str, str], ...]:
    """meta.cdc_personal_data[subject] as (attribute, column) pairs (macros/cdc/erasure.sql reads it the same way)."""
    declared = ((meta or {}).get("cdc_personal_data") or {}).get(subject) or []
    if isinstance(declared, dict):
        pairs = [(str(a).lower(), str(c).lower()) for a, c in declared.items()]
    elif isinstance(declared, list):
        pairs = [(str(c).lower(), str(c).lower()) for c in declared]
    else:
        raise ErasureError(f"meta.cdc_personal_data.{subject} must be a list of columns or a mapping, not {declared!r}")
    return tuple(sorted(pairs))


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
                Holder(
                    f"{source.source_name}.{source.name}",
                    column,
                    folder=Path(source.identifier),
                    producer=producer,
                    personal=_personal(source.meta, subject),
                )
            )
    inherited, inherited_personal = {}, {}
    for table in cdc_tables(manifest):
        source = next(
            s for s in manifest.sources.values() if s.source_name == table.source_name and s.name == table.table_name
        )
        column = _subjects(source.meta).get(subject)
        if column:
            inherited[table.model] = column.lower()
            inherited_personal[table.model] = _personal(source.meta, subject)
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
                personal=_personal(node.config.meta, subject)
                or _personal(node.meta, subject)
                or inherited_personal.get(node.name, ()),
            )
        )
    return sorted(tables, key=lambda h: h.name), sorted(raw, key=lambda h: h.name)


def undeclared_downstream(manifest, subject: str, tables: Iterable[Holder]) -> list[str]:
    """Table models and snapshots built (through views or not) from a holder of `subject` that declare
    no subject key themselves: they may hold the subject where no erasure or rectification reaches."""
    names = {holder.name for holder in tables}
    carriers = {uid for uid, source in manifest.sources.items() if _subjects(source.meta).get(subject)}
    nodes = [n for n in manifest.nodes.values() if n.resource_type in ("model", "snapshot")]
    holding = {n.unique_id for n in nodes if n.name in names}
    carriers |= holding
    changed = True
    while changed:
        changed = False
        for node in nodes:
            if node.unique_id not in carriers and set(node.depends_on.nodes) & carriers:
                carriers.add(node.unique_id)
                changed = True
    return sorted(
        node.name
        for node in nodes
        if node.unique_id in carriers
        and node.unique_id not in holding
        and node.config.materialized in TABLE_MATERIALIZATIONS
    )


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
    _replace_file(path, source, table.filter(pc.invert(mask)))
    return removed


def _replace_file(path: Path, source, table) -> None:
    """Writes `table` under a hidden name beside `path` (which no reader lists), then renames it over
    `path`: a reader sees the old file or the new one, never half of one. Same compression."""
    import pyarrow.parquet as pq

    compression = source.metadata.row_group(0).column(0).compression if source.metadata.num_row_groups else "snappy"
    staged = path.with_name(f".{path.name}.erasing")
    pq.write_table(table, staged, compression=compression.lower() if compression != "UNCOMPRESSED" else "none")
    with open(staged, "rb") as handle:
        os.fsync(handle.fileno())
    os.replace(staged, path)


def _images(table, producer: str) -> list[tuple[str | None, object]]:
    """(struct column or None, the columns it holds by lower-case name): the top level of a DMS or
    flattened Debezium file; `before` and `after` of a Debezium envelope."""
    import pyarrow as pa

    by_lower = {name.lower(): name for name in table.column_names}
    if producer != "debezium_envelope":
        return [(None, {name.lower(): table.column(name).combine_chunks() for name in table.column_names})]
    images = []
    for image in ("before", "after"):
        if image in by_lower and pa.types.is_struct(table.schema.field(by_lower[image]).type):
            struct = table.column(by_lower[image]).combine_chunks()
            images.append((by_lower[image], {f.name.lower(): struct.field(i) for i, f in enumerate(struct.type)}))
    return images


def raw_personal_values(path: Path, key_column: str, keys: Sequence[str], producer: str, columns: Sequence[str]):
    """{(column, key): {old values as text}} of the subject keys' non-null values of `columns` in one
    raw file, and {column: Arrow type}."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    values: dict[tuple[str, str], set[str]] = {}
    types: dict[str, object] = {}
    wanted = set(keys)
    for _, image in _images(pq.read_table(path), producer):
        if key_column.lower() not in image:
            continue
        key_text = pc.cast(image[key_column.lower()], pa.string()).to_pylist()
        for column in columns:
            if column not in image:
                continue
            types[column] = image[column].type
            for key, value in zip(key_text, pc.cast(image[column], pa.string()).to_pylist(), strict=True):
                if key in wanted and value is not None:
                    values.setdefault((column, key), set()).add(value)
    return values, types


def rectify_raw_file(path: Path, key_column: str, keys: Sequence[str], producer: str, changes: dict[str, str]) -> int:
    """Rewrites one raw file with the correction `changes` ({column: new value}) in the rows of the
    subject keys (a null stays null); returns how many values changed (0: untouched)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    source = pq.ParquetFile(path)
    table = source.read()
    wanted = pa.array(list(keys), type=pa.string())
    changed = 0
    for struct_name, image in _images(table, producer):
        if key_column.lower() not in image:
            continue
        rows = pc.fill_null(pc.is_in(pc.cast(image[key_column.lower()], pa.string()), value_set=wanted), False)
        replaced = {}
        for column, new_value in changes.items():
            if column not in image:
                continue
            old = image[column]
            new = pa.scalar(new_value, pa.string()).cast(old.type)
            hit = pc.and_(rows, pc.and_(pc.is_valid(old), pc.invert(pc.fill_null(pc.equal(old, new), False))))
            count = pc.sum(hit).as_py() or 0
            if count:
                replaced[column] = pc.if_else(hit, new, old)
                changed += count
        if not replaced:
            continue
        if struct_name is None:
            for name in table.column_names:
                if name.lower() in replaced:
                    table = table.set_column(table.schema.get_field_index(name), name, replaced[name.lower()])
        else:
            struct = table.column(struct_name).combine_chunks()
            children = [replaced.get(f.name.lower(), struct.field(i)) for i, f in enumerate(struct.type)]
            rebuilt = pa.StructArray.from_arrays(children, fields=list(struct.type), mask=struct.is_null())
            table = table.set_column(table.schema.get_field_index(struct_name), struct_name, rebuilt)
    if changed:
        _replace_file(path, source, table)
    return changed


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
    undeclared: list[str] = field(default_factory=list)  # tables built from holders that declare no subject
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
    report.undeclared = undeclared_downstream(manifest, subject, tables)
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
    # a rectification of these keys: its corrections are personal data too
    corrections = f"{quote_ident(warehouse.meta_schema)}.rectification_register"
    corrected = 0
    if warehouse.table_exists(warehouse.meta_schema, "rectification_register"):
        condition = f"subject = {sql_string(subject)} and key_hash in ({hash_list})"
        corrected = warehouse.query(f"select count(*) from {corrections} where {condition}")[0][0]
        if corrected:
            warehouse.execute(f"delete from {corrections} where {condition}")
            report.rows["rectification_register"] = corrected
            touched.append(corrections)
    _rewrite_data_files(warehouse, touched)
    # 5. history: every snapshot older than now, and the files only they used, of every table that holds
    #    the subject (also those with no row of it left today: their older snapshots may have some)
    expired = [holder.relation for holder in tables]
    if tombstone_total or any(h.tombstone_model for h in tables):
        expired.append(tombstones)
    if corrected:
        expired.append(corrections)
    _expire_all(warehouse, expired, report)
    report.seconds = time.monotonic() - started
    _log(warehouse, report, reason, started_at)
    return report


def value_hash(secret: str, subject: str, column: str, key: str, value: str) -> str:
    """The keyed hash of a rectified old value, as macros/cdc/erasure.sql (cdc_value_hash_sql) computes it."""
    return hashlib.sha256(f"{secret}|{subject}|{column}|{key}|{value}".encode()).hexdigest()


def parse_changes(assignments: Iterable[str]) -> dict[str, str]:
    """`--set column=value` options as {column (lower case): value}."""
    changes: dict[str, str] = {}
    for assignment in assignments:
        column, equals, value = assignment.partition("=")
        if not equals or not column.strip():
            raise ErasureError(f"--set {assignment!r}: expected column=value")
        if column.strip().lower() in changes:
            raise ErasureError(f"--set names column {column.strip()!r} twice")
        changes[column.strip().lower()] = value
    if not changes:
        raise ErasureError("nothing to rectify (--set column=value)")
    return changes


def rectify(
    warehouse: Warehouse,
    manifest,
    subject: str,
    keys: Sequence[str],
    changes: dict[str, str],
    reason: str,
    secret: str | None = None,
) -> ErasureReport:
    """Sets the personal columns `changes` ({attribute: new value}, attributes as the source names them)
    of the subject keys `keys` everywhere they are held; raises ErasureError before any write when it cannot."""
    started = time.monotonic()
    started_at = dt.datetime.now(dt.timezone.utc)
    secret = secret or secret_from_env()
    keys = sorted({str(k).strip() for k in keys if str(k).strip()})
    if not keys:
        raise ErasureError("no key to rectify (--key)")
    if not reason.strip():
        raise ErasureError("--reason is required: the erasure log records why (e.g. a request's reference)")
    tables, raw = holders(manifest, subject)
    tables = [h for h in tables if set(h.personal_columns) & set(changes)]
    raw = [h for h in raw if set(h.personal_columns) & set(changes)]
    for attribute in changes:
        if not any(attribute in h.personal_columns for h in [*tables, *raw]):
            raise ErasureError(
                f"{attribute!r} is not declared as personal data of subject {subject!r} anywhere: add it to "
                f"meta.cdc_personal_data {{{subject}: [...]}} of the sources and models that hold it; "
                "nothing was changed"
            )
        for holder in [*tables, *raw]:
            if holder.personal_columns.get(attribute, "") == holder.column.lower():
                raise ErasureError(
                    f"{attribute!r} is the key of subject {subject!r} in {holder.name}: a key is not rectified "
                    "(erase the subject instead); nothing was changed"
                )
    hashes = {k: subject_hash(secret, subject, k) for k in keys}
    report = ErasureReport(
        run_id=uuid.uuid4().hex, subject=subject, key_hashes=sorted(hashes.values()), target=warehouse.target
    )
    report.undeclared = undeclared_downstream(manifest, subject, holders(manifest, subject)[0])
    # 1. checks, before any write: the secret, the columns, the new values' types; the old values
    _check_secret_in_warehouse(warehouse, secret)
    tables = _check_columns(warehouse, tables)
    types: dict[str, dict[str, str]] = {}
    for holder in tables:
        declared = {name.lower(): data_type for name, data_type in warehouse.columns(holder.schema, holder.identifier)}
        types[holder.name] = {}
        for attribute, column in holder.personal_columns.items():
            if attribute not in changes:
                continue
            if column not in declared:
                raise ErasureError(
                    f"{holder.name} ({holder.schema}.{holder.identifier}) has no column {column!r}, declared as "
                    f"personal data {attribute!r} in meta.cdc_personal_data; nothing was changed"
                )
            cast = warehouse.query(f"select cast({sql_string(changes[attribute])} as {declared[column]}) is null")[0][0]
            if cast and changes[attribute] != "":
                raise ErasureError(
                    f"{holder.name}.{column} is {declared[column]}: {attribute}={changes[attribute]!r} is not a value "
                    "of that type; nothing was changed"
                )
            types[holder.name][attribute] = declared[column]
    hash_list = ", ".join(sql_string(h) for h in hashes.values())
    old: dict[tuple[str, str], set[str]] = {}  # (attribute, key) -> old values as text
    for holder in tables:
        for attribute, column in holder.personal_columns.items():
            if attribute not in changes:
                continue
            rows = warehouse.query(
                f"select distinct cast({quote_ident(holder.column)} as string), cast({quote_ident(column)} as string)"
                f" from {holder.relation} where {hash_sql(subject, quote_ident(holder.column))} in ({hash_list})"
                f" and {quote_ident(column)} is not null"
            )
            for key, value in rows:
                old.setdefault((attribute, key), set()).add(value)
    raw_files: list[tuple[Holder, Path]] = []
    for holder in raw:
        if "://" in str(holder.folder) and not str(holder.folder).startswith("file:"):
            raise ErasureError(
                f"{holder.name}: raw files at {holder.folder} are not on a local file system; this rectification "
                "rewrites local landing folders only. Nothing was changed"
            )
        columns = {column: attribute for attribute, column in holder.personal_columns.items() if attribute in changes}
        for path in sorted(landing_files(holder.folder)) if holder.folder.exists() else []:
            found, arrow_types = raw_personal_values(path, holder.column, keys, holder.producer, list(columns))
            for column, arrow_type in arrow_types.items():
                try:
                    _arrow_value(changes[columns[column]], arrow_type)
                except ErasureError as error:
                    message = f"{path} ({holder.name}), column {column!r}: {error}; nothing was changed"
                    raise ErasureError(message) from None
            for (column, key), values in found.items():
                old.setdefault((columns[column], key), set()).update(values)
            if found:
                raw_files.append((holder, path))
    # 2. the register: from now on staging replaces every old value by its correction
    _register(warehouse, subject, [], secret)  # the check row: tells a missing secret apart
    _register_corrections(warehouse, subject, hashes, changes, old, secret)
    log.info("rectify: %d old value(s) of %d key(s) registered (keyed hashes)", sum(map(len, old.values())), len(keys))
    # 3. raw files
    for holder, path in raw_files:
        columns = {c: changes[a] for a, c in holder.personal_columns.items() if a in changes}
        count = rectify_raw_file(path, holder.column, keys, holder.producer, columns)
        if count:
            report.rows[f"raw {holder.name}"] = report.rows.get(f"raw {holder.name}", 0) + count
            report.raw_files.append(path.relative_to(holder.folder).as_posix())
    # 4. tables
    touched: list[str] = []
    for holder in tables:
        key_condition = f"{hash_sql(subject, quote_ident(holder.column))} in ({hash_list})"
        for attribute, data_type in types[holder.name].items():
            column = quote_ident(holder.personal_columns[attribute])
            new = f"cast({sql_string(changes[attribute])} as {data_type})"
            condition = f"{key_condition} and {column} is not null and not ({column} <=> {new})"
            count = warehouse.query(f"select count(*) from {holder.relation} where {condition}")[0][0]
            report.rows[f"{holder.name}.{holder.personal_columns[attribute]}"] = count
            if count:
                warehouse.execute(f"update {holder.relation} set {column} = {new} where {condition}")
                if holder.relation not in touched:
                    touched.append(holder.relation)
            log.info("rectify: %s.%s: %d value(s) changed", holder.name, holder.personal_columns[attribute], count)
    _rewrite_data_files(warehouse, touched)
    # 5. history: the register's older snapshots hold earlier corrections, the tables' the old values
    corrections = f"{quote_ident(warehouse.meta_schema)}.rectification_register"
    _expire_all(warehouse, [holder.relation for holder in tables] + [corrections], report)
    report.seconds = time.monotonic() - started
    _log(warehouse, report, reason, started_at, action="rectify")
    return report


def _arrow_value(value: str, arrow_type):
    """`value` as a scalar of a raw file's column type, or ErasureError."""
    import pyarrow as pa

    try:
        return pa.scalar(value, pa.string()).cast(arrow_type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
        raise ErasureError(f"{value!r} is not a value of type {arrow_type} ({error})") from None


def _register_corrections(
    warehouse: Warehouse,
    subject: str,
    hashes: dict[str, str],
    changes: dict[str, str],
    old: dict[tuple[str, str], set[str]],
    secret: str,
) -> None:
    """The rectification register: earlier corrections of these (key, column) take the new value;
    each old value found gets a row (keyed hash, correction)."""
    corrections = f"{quote_ident(warehouse.meta_schema)}.rectification_register"
    for attribute, new_value in changes.items():
        warehouse.execute(
            f"update {corrections} set new_value = {sql_string(new_value)}, rectified_at = current_timestamp()"
            f" where subject = {sql_string(subject)} and column_name = {sql_string(attribute)}"
            f" and key_hash in ({', '.join(sql_string(h) for h in hashes.values())})"
        )
    rows = sorted(
        {
            (hashes[key], attribute, value_hash(secret, subject, attribute, key, value), changes[attribute])
            for (attribute, key), values in old.items()
            for value in values
            if value != changes[attribute]
        }
    )
    for start in range(0, len(rows), 500):
        values = ", ".join(
            f"({sql_string(subject)}, {sql_string(k)}, {sql_string(a)}, {sql_string(v)}, {sql_string(n)})"
            for k, a, v, n in rows[start : start + 500]
        )
        warehouse.execute(
            f"insert into {corrections} select new.*, current_timestamp()"
            f" from (values {values}) as new(subject, key_hash, column_name, value_hash, new_value)"
            f" left anti join {corrections} as old on old.value_hash = new.value_hash"
        )


def _rewrite_data_files(warehouse: Warehouse, relations: Iterable[str]) -> None:
    """Deleted or updated rows may still be in data files behind merge-on-read position deletes:
    rewrite those files."""
    for relation in relations:
        name = relation.replace("`", "")
        warehouse.query(
            f"call spark_catalog.system.rewrite_data_files(table => {sql_string(name)},"
            " options => map('delete-file-threshold', '1'))"
        )
        warehouse.query(f"call spark_catalog.system.rewrite_position_delete_files(table => {sql_string(name)})")


def _expire_all(warehouse: Warehouse, relations: Iterable[str], report: ErasureReport) -> None:
    """Every snapshot older than now, and the files only they used, then the orphan files."""
    since = dt.datetime.now(dt.timezone.utc)
    for relation in relations:
        _expire(warehouse, relation, report, since)


def _log(
    warehouse: Warehouse, report: ErasureReport, reason: str, started_at: dt.datetime, action: str = "erase"
) -> None:
    def array(values: Iterable[str]) -> str:
        items = ", ".join(sql_string(v) for v in values)
        return f"array({items})" if items else "cast(array() as array<string>)"

    rows = ", ".join(f"{sql_string(k)}, cast({v} as bigint)" for k, v in sorted(report.rows.items()))
    rows_map = f"map({rows})" if rows else "cast(map() as map<string, bigint>)"
    warehouse.execute(
        f"insert into {quote_ident(warehouse.meta_schema)}.erasure_log"
        f" select {sql_string(report.run_id)}, {sql_string(action)},"
        f" {sql_string(report.subject)}, {array(report.key_hashes)}, {sql_string(reason)},"
        f" cast({sql_string(started_at.strftime('%Y-%m-%d %H:%M:%S'))} as timestamp), current_timestamp(),"
        f" {array(report.tables_touched)}, {rows_map}, {array(report.raw_files)},"
        f" {report.snapshots_expired}, {report.files_removed}"
    )


def summary(report: ErasureReport, action: str = "erase") -> list[str]:
    """What an erasure or a rectification did, in a few lines for its user (no key, no personal value)."""
    done, unit = ("erased", "row(s)") if action == "erase" else ("rectified", "value(s)")
    tables = {name: rows for name, rows in report.rows.items() if not name.startswith("raw ")}
    raw = {name[4:]: rows for name, rows in report.rows.items() if name.startswith("raw ")}
    lines = [
        f"{done} {len(report.key_hashes)} {report.subject} key(s) on target {report.target} in {report.seconds:.1f} s"
        f" (erasure_log run_id {report.run_id})",
        "  tables: " + (", ".join(f"{n} {r}" for n, r in sorted(tables.items()) if r) or "none held") + f" {unit}",
        f"  raw files rewritten: {len(report.raw_files)} ("
        + (", ".join(f"{n} {r}" for n, r in sorted(raw.items()) if r) or "none held")
        + f" {unit})",
        f"  snapshots expired: {report.snapshots_expired}, files removed: {report.files_removed}",
    ]
    for ref in report.refs_kept:
        lines.append(f"  WARNING: {ref} keeps older snapshots, which may still hold the {done} data: drop it")
    if report.undeclared:
        lines.append(
            f"  WARNING: built from tables that hold subject {report.subject}, but declaring no "
            f"meta.cdc_subjects (not {done} there): {', '.join(report.undeclared)}"
        )
    return lines
