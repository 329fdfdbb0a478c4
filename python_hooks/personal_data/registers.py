"""What erasure and rectification share: the report, the checks before any write, the erasure
register, the history (older snapshots and orphan files) that must go, and the erasure log."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from python_hooks.personal_data.subjects import (
    CHECK_KEY,
    CHECK_SUBJECT,
    SECRET_ENV,
    ErasureError,
    Holder,
    hash_sql,
    subject_hash,
)
from python_hooks.project import iceberg
from python_hooks.project.meta import ERASURE_LOG, ERASURE_REGISTER
from python_hooks.project.sql import quoted_relation, sql_string
from python_hooks.project.warehouse import Warehouse

log = logging.getLogger(__name__)


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


def check_secret_in_warehouse(warehouse: Warehouse, secret: str) -> None:
    """The warehouse (the Spark driver: this process, or the cluster's Thrift Server) must see the same secret."""
    seen = warehouse.query(f"select {hash_sql(CHECK_SUBJECT, sql_string(CHECK_KEY))}")[0][0]
    if seen != subject_hash(secret, CHECK_SUBJECT, CHECK_KEY):
        raise ErasureError(
            f"the warehouse of target {warehouse.target} does not see this {SECRET_ENV} (on the cluster target the "
            "Thrift Server needs it in the environment of `make cluster-up`); nothing was erased"
        )


def check_columns(warehouse: Warehouse, tables: Iterable[Holder]) -> list[Holder]:
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


def register_keys(warehouse: Warehouse, subject: str, hashes: Sequence[str], secret: str) -> None:
    register = quoted_relation(warehouse.meta_schema, ERASURE_REGISTER)
    rows = [(CHECK_SUBJECT, subject_hash(secret, CHECK_SUBJECT, CHECK_KEY))] + [(subject, h) for h in hashes]
    values = ", ".join(f"({sql_string(s)}, {sql_string(h)})" for s, h in rows)
    warehouse.execute(
        f"insert into {register} select new.subject, new.key_hash, current_timestamp()"
        f" from (values {values}) as new(subject, key_hash)"
        f" left anti join {register} as old on old.subject = new.subject and old.key_hash = new.key_hash"
    )


def expire(warehouse: Warehouse, relation: str, report: ErasureReport, since: dt.datetime) -> None:
    """Every snapshot of the table older than `since` goes, with the data and metadata files only they
    used (Iceberg's expire_snapshots deletes them), then the orphan files."""
    result = iceberg.expire_snapshots(warehouse, relation, older_than=since, retain_last=1)
    report.snapshots_expired += result.snapshots_expired
    report.files_removed += result.files_deleted
    report.files_removed += iceberg.remove_orphans_since(warehouse, relation, since)
    for name, kind in iceberg.refs_besides_main(warehouse, relation):
        report.refs_kept.append(f"{relation} {kind.lower()} {name}")


def expire_all(warehouse: Warehouse, relations: Iterable[str], report: ErasureReport) -> None:
    """Every snapshot older than now, and the files only they used, then the orphan files."""
    since = dt.datetime.now(dt.timezone.utc)
    for relation in relations:
        expire(warehouse, relation, report, since)


def rewrite_data_files(warehouse: Warehouse, relations: Iterable[str]) -> None:
    """Deleted or updated rows may still be in data files behind merge-on-read position deletes:
    rewrite those files."""
    for relation in relations:
        iceberg.rewrite_data_files(warehouse, relation)


def write_log(
    warehouse: Warehouse, report: ErasureReport, reason: str, started_at: dt.datetime, action: str = "erase"
) -> None:
    def array(values: Iterable[str]) -> str:
        items = ", ".join(sql_string(v) for v in values)
        return f"array({items})" if items else "cast(array() as array<string>)"

    rows = ", ".join(f"{sql_string(k)}, cast({v} as bigint)" for k, v in sorted(report.rows.items()))
    rows_map = f"map({rows})" if rows else "cast(map() as map<string, bigint>)"
    warehouse.execute(
        f"insert into {quoted_relation(warehouse.meta_schema, ERASURE_LOG)}"
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
