"""Rectify data subjects' personal columns everywhere they are held (`python -m python_hooks rectify`).

The same steps as an erasure, with values instead of rows: the rectification register gets, per
(subject, column, key, old value) found in a table or raw file, the keyed hash of the old value and
the correction, which staging substitutes (so no late or re-delivered event brings an old value
back, while a value the source changes later passes); raw files (on this machine's disk or on S3,
rewritten under their own names: raw_files.py; the schema hook's footer cache learns their new sizes,
so that the next run does not take them for applied files changed in place), then every table's rows of the key get the
correction (a null stays null); older snapshots and orphan files go.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
import uuid
from collections.abc import Sequence

from python_hooks.evolution.footers import note_rewritten
from python_hooks.personal_data.raw_files import (
    arrow_value,
    raw_folder_files,
    raw_personal_values,
    rectify_raw_file,
    stopped,
)
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
    Holder,
    hash_sql,
    holders,
    secret_from_env,
    subject_hash,
    undeclared_downstream,
    value_hash,
)
from python_hooks.project.meta import RECTIFICATION_REGISTER
from python_hooks.project.sql import quote_ident, quoted_relation, sql_string
from python_hooks.project.storage import StoredFile
from python_hooks.project.warehouse import Warehouse, state_dir

log = logging.getLogger(__name__)


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
    check_secret_in_warehouse(warehouse, secret)
    tables = check_columns(warehouse, tables)
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
    raw_files: list[tuple[Holder, StoredFile]] = []
    for holder in raw:
        columns = {column: attribute for attribute, column in holder.personal_columns.items() if attribute in changes}
        try:
            files = raw_folder_files(holder)
        except ErasureError as error:
            raise ErasureError(f"{error}; nothing was changed") from None
        for file in files:
            try:
                found, arrow_types = raw_personal_values(file, holder.column, keys, holder.producer, list(columns))
            except ErasureError as error:
                raise ErasureError(f"{holder.name}: {error}; nothing was changed") from None
            for column, arrow_type in arrow_types.items():
                try:
                    arrow_value(changes[columns[column]], arrow_type)
                except ErasureError as error:
                    message = f"{file} ({holder.name}), column {column!r}: {error}; nothing was changed"
                    raise ErasureError(message) from None
            for (column, key), values in found.items():
                old.setdefault((columns[column], key), set()).update(values)
            if found:
                raw_files.append((holder, file))
    # 2. the register: from now on staging replaces every old value by its correction
    register_keys(warehouse, subject, [], secret)  # the check row: tells a missing secret apart
    register_corrections(warehouse, subject, hashes, changes, old, secret)
    log.info("rectify: %d old value(s) of %d key(s) registered (keyed hashes)", sum(map(len, old.values())), len(keys))
    # 3. raw files (the footer cache is told of each rewritten one: evolution/footers.py, note_rewritten)
    rewritten = []
    try:
        for holder, file in raw_files:
            columns = {c: changes[a] for a, c in holder.personal_columns.items() if a in changes}
            try:
                count = rectify_raw_file(file, holder.column, keys, holder.producer, columns)
            except ErasureError as error:
                raise ErasureError(stopped(error, "rectify", report.raw_files)) from None
            if count:
                report.rows[f"raw {holder.name}"] = report.rows.get(f"raw {holder.name}", 0) + count
                report.raw_files.append(file.relative)
                rewritten.append(file.location)
    finally:
        note_rewritten(state_dir(), rewritten)
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
    rewrite_data_files(warehouse, touched)
    # 5. history: the register's older snapshots hold earlier corrections, the tables' the old values
    corrections = quoted_relation(warehouse.meta_schema, RECTIFICATION_REGISTER)
    expire_all(warehouse, [holder.relation for holder in tables] + [corrections], report)
    report.seconds = time.monotonic() - started
    write_log(warehouse, report, reason, started_at, action="rectify")
    return report


def register_corrections(
    warehouse: Warehouse,
    subject: str,
    hashes: dict[str, str],
    changes: dict[str, str],
    old: dict[tuple[str, str], set[str]],
    secret: str,
) -> None:
    """The rectification register: earlier corrections of these (key, column) take the new value;
    each old value found gets a row (keyed hash, correction)."""
    corrections = quoted_relation(warehouse.meta_schema, RECTIFICATION_REGISTER)
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
