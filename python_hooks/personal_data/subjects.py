"""Data subjects: where the project holds them (declared once, in dbt yml `meta`), and their keyed
hashes. No key and no personal value is ever written anywhere but in the keyed hash.

    sources:  meta: {cdc_subjects: {customer: id}, cdc_personal_data: {customer: [name]}}
    models / snapshots:  config: {meta: {cdc_subjects: {customer: customer_id},
                                         cdc_personal_data: {customer: {name: sales_customer_name}}}}

`cdc_subjects` names the column holding the subject's key; `cdc_personal_data` the personal columns a
rectification may change, as a list, or as a mapping from the source's column name (what `--set`
names) to the model's own. A current-state model holds the subjects and personal columns of its
source (same column names); any other table model, incremental model or snapshot declares its own.
Views hold no data.

The keyed hash sha2('<secret>|<subject>|<key>', 256) is computed here in Python (`subject_hash`) and
in SQL (`hash_sql` here, `cdc_subject_hash_sql` in macros/cdc/erasure.sql, which staging uses);
the erasure tests hold the sides together (an erased subject never comes back through staging).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass

from python_hooks.project.sql import quoted_relation, sql_string
from python_hooks.project.storage import Location
from python_hooks.project.tables import (
    TABLE_MATERIALIZATIONS,
    cdc_tables,
    is_current_state,
    key_columns,
    source_of,
    source_producer,
)

SECRET_ENV = "CDC_ERASURE_SECRET"
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


def value_hash(secret: str, subject: str, column: str, key: str, value: str) -> str:
    """The keyed hash of a rectified old value, as macros/cdc/erasure.sql (cdc_value_hash_sql) computes it."""
    return hashlib.sha256(f"{secret}|{subject}|{column}|{key}|{value}".encode()).hexdigest()


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


@dataclass(frozen=True)
class Holder:
    """A place that holds a subject: a table (schema, identifier) or a raw landing folder."""

    name: str  # model, snapshot or source (source_name.table)
    column: str
    schema: str = ""
    identifier: str = ""
    folder: Location | None = None  # raw folders: the landing folder (project/storage.py)
    producer: str = ""  # raw folders: a producer kind (python_hooks/project/producers.py)
    tombstone_model: str = ""  # a current-state model keyed by the subject's column: its tombstones go too
    personal: tuple[tuple[str, str], ...] = ()  # (attribute, column): meta.cdc_personal_data

    @property
    def personal_columns(self) -> dict[str, str]:
        """{attribute (the source's column name, as `--set` names it): this table's column}."""
        return dict(self.personal)

    @property
    def relation(self) -> str:
        return quoted_relation(self.schema, self.identifier)


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
    raw: list[Holder] = []
    for source in manifest.sources.values():
        column = _subjects(source.meta).get(subject)
        if column:
            raw.append(
                Holder(
                    f"{source.source_name}.{source.name}",
                    column,
                    folder=Location.parse(source.identifier),
                    producer=source_producer(source).kind,
                    personal=_personal(source.meta, subject),
                )
            )
    inherited, inherited_personal = {}, {}
    for table in cdc_tables(manifest):
        source = source_of(manifest, table.source_name, table.table_name)
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
        keys = key_columns(node.config.get("unique_key"))
        keyed = is_current_state(node) and [k.lower() for k in keys] == [column.lower()]
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
