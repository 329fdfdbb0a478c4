"""Erase data subjects from the whole lakehouse (`python -m python_hooks erase`), in this order (each
step can be run again: erasing the same keys twice is safe):

1. checks, before any write: the secret (CDC_ERASURE_SECRET) is set and the warehouse sees the same
   one, every declared column exists;
2. the register (`<schema>_cdc_meta.erasure_register`) gets the keyed hash of each key: from then on
   staging leaves out every change event of the subject (macros/cdc/erasure.sql), so a late file, a
   re-delivered file or a --full-refresh never brings it back, even while this erasure runs;
3. the raw landing files holding the subject are rewritten without its rows, under their own names,
   on this machine's disk or on S3 (raw_files.py; the folders are listed in step 1 too, so that keys S3
   refuses or a missing bucket stop the erasure before any write); the schema hook's footer cache learns
   their new sizes, so that the next run does not take them for applied files changed in place;
4. every table holding the subject loses its rows (a DELETE by keyed hash: no key enters the SQL),
   the tombstones of its keys go too, and the data files that held them are rewritten;
5. every snapshot older than the erasure is expired (Iceberg deletes the files only they used) and
   orphan files past the safety interval are removed;
6. `erasure_log` gets one row: when, subject, hashed keys, reason, tables, rows, raw files, snapshots
   and files. No key and no personal value is logged anywhere.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
import uuid
from collections.abc import Sequence

from python_hooks.evolution.footers import note_rewritten
from python_hooks.personal_data.raw_files import raw_folder_files, scrub_raw_file, stopped
from python_hooks.personal_data.registers import (
    ErasureReport,
    check_columns,
    check_secret_in_warehouse,
    expire_all,
    register_keys,
    rewrite_data_files,
    write_log,
)
from python_hooks.personal_data.subjects import (
    ErasureError,
    hash_sql,
    holders,
    secret_from_env,
    subject_hash,
    undeclared_downstream,
)
from python_hooks.project.meta import RECTIFICATION_REGISTER, TOMBSTONES
from python_hooks.project.sql import quote_ident, quoted_relation, sql_string
from python_hooks.project.warehouse import Warehouse, state_dir

log = logging.getLogger(__name__)


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
    check_secret_in_warehouse(warehouse, secret)
    tables = check_columns(warehouse, tables)
    for holder in raw:
        try:
            raw_folder_files(holder, warn=False)  # reachable and listable, before any write
        except ErasureError as error:
            raise ErasureError(f"{error}; nothing was erased") from None
    # 2. the register: from now on staging leaves the subject out
    register_keys(warehouse, subject, hashes, secret)
    log.info("erase: %d key(s) of subject %s registered (keyed hashes)", len(hashes), subject)
    # 3. raw files (the footer cache is told of each rewritten one: evolution/footers.py, note_rewritten)
    rewritten = []
    try:
        for holder in raw:
            removed = 0
            try:
                for file in raw_folder_files(holder):
                    rows = scrub_raw_file(file, holder.column, keys, holder.producer)
                    if rows:
                        removed += rows
                        report.raw_files.append(file.relative)
                        rewritten.append(file.location)
            except ErasureError as error:
                raise ErasureError(stopped(error, "erase", report.raw_files)) from None
            report.rows[f"raw {holder.name}"] = removed
            log.info("erase: raw files of %s: %d row(s) removed", holder.name, removed)
    finally:
        note_rewritten(state_dir(), rewritten)
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
    tombstones = quoted_relation(warehouse.meta_schema, TOMBSTONES)
    tombstone_total = 0
    for holder in tables:
        if not holder.tombstone_model or not warehouse.table_exists(warehouse.meta_schema, TOMBSTONES):
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
    corrections = quoted_relation(warehouse.meta_schema, RECTIFICATION_REGISTER)
    corrected = 0
    if warehouse.table_exists(warehouse.meta_schema, RECTIFICATION_REGISTER):
        condition = f"subject = {sql_string(subject)} and key_hash in ({hash_list})"
        corrected = warehouse.query(f"select count(*) from {corrections} where {condition}")[0][0]
        if corrected:
            warehouse.execute(f"delete from {corrections} where {condition}")
            report.rows["rectification_register"] = corrected
            touched.append(corrections)
    rewrite_data_files(warehouse, touched)
    # 5. history: every snapshot older than now, and the files only they used, of every table that holds
    #    the subject (also those with no row of it left today: their older snapshots may have some)
    expired = [holder.relation for holder in tables]
    if tombstone_total or any(h.tombstone_model for h in tables):
        expired.append(tombstones)
    if corrected:
        expired.append(corrections)
    expire_all(warehouse, expired, report)
    report.seconds = time.monotonic() - started
    write_log(warehouse, report, reason, started_at)
    return report
