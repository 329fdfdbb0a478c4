"""Iceberg's table procedures and metadata tables, one table at a time, through the warehouse seam:
snapshots, snapshot expiry, orphan-file removal, manifest rewrite, bounded metadata files, data-file
rewrite. `make maintain` (python_hooks/commands/maintain.py) and erasure
(python_hooks/personal_data/) both call these; neither calls the other."""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass

from python_hooks.project.sql import quote_ident, quoted_relation, split_relation, sql_string
from python_hooks.project.warehouse import Warehouse, process_session

log = logging.getLogger(__name__)

# Iceberg's own default for remove_orphan_files (DeleteOrphanFiles' olderThan); its SQL procedure
# refuses anything under MIN_ORPHAN_INTERVAL.
ORPHAN_INTERVAL = dt.timedelta(days=3)
MIN_ORPHAN_INTERVAL = dt.timedelta(hours=24)


@dataclass
class Expiry:
    """What `expire_snapshots` did to one table: snapshots dropped, and the files Iceberg deleted
    because no retained snapshot needed them (the procedure's counts)."""

    snapshots_expired: int = 0
    snapshots_kept: int = 0
    data_files: int = 0
    delete_files: int = 0
    manifests: int = 0
    manifest_lists: int = 0
    statistics_files: int = 0

    @property
    def files_deleted(self) -> int:
        return self.data_files + self.delete_files + self.manifests + self.manifest_lists + self.statistics_files


def utc(moment: dt.datetime) -> dt.datetime:
    """Aware UTC; a naive datetime is taken as UTC."""
    return moment.replace(tzinfo=dt.timezone.utc) if moment.tzinfo is None else moment.astimezone(dt.timezone.utc)


def _timestamp(moment: dt.datetime) -> str:
    """A Spark timestamp literal for an instant, with its offset (independent of the session's zone)."""
    return "timestamp " + sql_string(utc(moment).strftime("%Y-%m-%d %H:%M:%S.%f") + "+00:00")


def _names(relation: str) -> tuple[str, str]:
    """(quoted relation for SQL, the procedures' `table` argument as a string literal)."""
    schema, identifier = split_relation(relation)
    quoted = f"{quote_ident(schema)}.{quote_ident(identifier)}"
    return quoted, sql_string(quoted)


def snapshot_ids(warehouse: Warehouse, relation: str) -> list[int]:
    """The table's snapshots, oldest first."""
    quoted, _ = _names(relation)
    return [row[0] for row in warehouse.query(f"select snapshot_id from {quoted}.snapshots order by committed_at")]


def expire_snapshots(warehouse: Warehouse, relation: str, older_than: dt.datetime, retain_last: int) -> Expiry:
    """Expires the snapshots of `relation` ("schema.table") committed before `older_than`, keeping at
    least the last `retain_last` (>= 1) whatever their age (Iceberg's `expire_snapshots`), and with
    them the data, delete and manifest files no retained snapshot needs. Snapshots a branch or tag
    refers to stay. Returns the counts (`Expiry`; `snapshots_expired` is the snapshots listed before
    and gone after)."""
    if retain_last < 1:
        raise ValueError(f"{relation}: retain_last must be at least 1, got {retain_last}")
    quoted, table = _names(relation)
    before = set(snapshot_ids(warehouse, relation))
    sql = (
        f"call spark_catalog.system.expire_snapshots(table => {table}, older_than => {_timestamp(older_than)},"
        f" retain_last => {int(retain_last)})"
    )
    log.debug("%s: %s", relation, sql)
    rows = warehouse.query(sql)
    after = set(snapshot_ids(warehouse, relation))
    # (data, position delete, equality delete, manifest, manifest list, statistics) files deleted
    counts = [int(value or 0) for value in rows[0]] if rows else [0] * 6
    counts += [0] * (6 - len(counts))
    expiry = Expiry(
        snapshots_expired=len(before - after),
        snapshots_kept=len(after),
        data_files=counts[0],
        delete_files=counts[1] + counts[2],
        manifests=counts[3],
        manifest_lists=counts[4],
        statistics_files=counts[5],
    )
    log.debug("%s: expire_snapshots %s", relation, expiry)
    return expiry


def remove_orphan_files(warehouse: Warehouse, relation: str, older_than: dt.datetime) -> int:
    """Deletes the files under the table's location that no metadata of `relation` refers to and
    that were last modified before `older_than` (Iceberg's `remove_orphan_files`); returns how
    many. A writer's files are orphans until its commit: `older_than` must be further back than
    the longest run that can write to the table at the same time (default interval: 3 days).
    Iceberg's procedure refuses an `older_than` less than 24 hours ago; so does this function,
    before calling it, in one line."""
    interval = dt.datetime.now(dt.timezone.utc) - utc(older_than)
    if interval < MIN_ORPHAN_INTERVAL:
        raise ValueError(
            f"{relation}: orphan files can only be removed when older than 24 hours (asked: "
            f"{interval.total_seconds() / 3600:.1f} h): a run writing at the same time would lose its uncommitted "
            "files (Iceberg's remove_orphan_files refuses it too)"
        )
    _, table = _names(relation)
    sql = f"call spark_catalog.system.remove_orphan_files(table => {table}, older_than => {_timestamp(older_than)})"
    log.debug("%s: %s", relation, sql)
    rows = warehouse.query(sql)
    for row in rows:
        log.debug("%s: removed orphan file %s", relation, row[0])
    return len(rows)


def rewrite_manifests(warehouse: Warehouse, relation: str) -> int:
    """Rewrites the table's manifests into as few as their size needs (Iceberg's
    `rewrite_manifests`); returns how many were rewritten (0: nothing to do, no commit)."""
    _, table = _names(relation)
    rows = warehouse.query(f"call spark_catalog.system.rewrite_manifests(table => {table})")
    log.debug("%s: rewrite_manifests (rewritten, added) %s", relation, rows[0] if rows else None)
    return int(rows[0][0] or 0) if rows else 0


def bound_metadata_files(warehouse: Warehouse, relation: str, versions: int) -> bool:
    """Makes Iceberg delete a table's metadata files beyond the last `versions` at each commit
    (`write.metadata.delete-after-commit.enabled`, `write.metadata.previous-versions-max`); they are
    never deleted otherwise. True when the properties had to be set (one commit)."""
    quoted, _ = _names(relation)
    wanted = {
        "write.metadata.delete-after-commit.enabled": "true",
        "write.metadata.previous-versions-max": str(versions),
    }
    current = {row[0]: row[1] for row in warehouse.query(f"show tblproperties {quoted}")}
    if all(current.get(key) == value for key, value in wanted.items()):
        return False
    pairs = ", ".join(f"{sql_string(key)} = {sql_string(value)}" for key, value in wanted.items())
    warehouse.execute(f"alter table {quoted} set tblproperties ({pairs})")
    return True


def is_iceberg_table(warehouse: Warehouse, schema: str, identifier: str) -> bool:
    """Whether an existing relation is an Iceberg table (not a view, not a plain Spark table such as
    the binaryFile listings of the landing folders)."""
    rows = warehouse.query(f"describe table extended {quoted_relation(schema, identifier)}")
    details = {str(row[0]).strip().lower(): str(row[1] or "").strip().lower() for row in rows if row[0]}
    return details.get("provider") == "iceberg" and details.get("type", "").lower() != "view"


def warehouse_location(warehouse: Warehouse) -> str:
    rows = warehouse.query("set spark.sql.warehouse.dir")
    return str(rows[0][1]) if rows else "?"


def remove_orphans_since(warehouse: Warehouse, relation: str, since: dt.datetime) -> int:
    """Files under the table's location that no snapshot refers to, older than `since` (which may be
    now): the leftovers of writes that never committed, or of a table dropped without purge.
    On the embedded target this process is the warehouse's only writer
    (python_hooks/project/embedded_lock.py), so every orphan goes, through Iceberg's action on the
    process's own Spark session (its SQL procedure refuses an interval under 24 h). On a shared target
    a run writing now would lose its files: only orphans past the safety interval go, and
    `make maintain` removes the rest once they pass it. Returns how many files went."""
    if warehouse.target != "local":
        return remove_orphan_files(warehouse, relation, since - ORPHAN_INTERVAL)
    session = process_session()  # the embedded target only: this process's own session, dbt's
    spark = session._jvm.org.apache.iceberg.spark
    table = spark.Spark3Util.loadIcebergTable(session._jsparkSession, relation)
    action = spark.actions.SparkActions.get(session._jsparkSession).deleteOrphanFiles(table)
    removed = action.olderThan(int(since.timestamp() * 1000)).execute().orphanFileLocations().iterator()
    count = 0
    while removed.hasNext():
        log.debug("%s: removed orphan file %s", relation, removed.next())
        count += 1
    return count


def rewrite_data_files(warehouse: Warehouse, relation: str) -> None:
    """Rewrites the data files behind merge-on-read position deletes, and the delete files, so that
    deleted or updated rows are gone from every file the current snapshot reads."""
    _, table = _names(relation)
    warehouse.query(
        f"call spark_catalog.system.rewrite_data_files(table => {table}, options => map('delete-file-threshold', '1'))"
    )
    warehouse.query(f"call spark_catalog.system.rewrite_position_delete_files(table => {table})")


def refs_besides_main(warehouse: Warehouse, relation: str) -> list[tuple[str, str]]:
    """(name, type) of the table's branches and tags other than main."""
    quoted, _ = _names(relation)
    return [
        (name, kind) for name, kind in warehouse.query(f"select name, type from {quoted}.refs where name <> 'main'")
    ]


# The snapshot summary totals a batch reads (macros/cdc/publish.sql: cdc_table_state, whose meaning this keeps).
STATE_TOTALS = {
    "bytes": "total-files-size",
    "data_rows": "total-records",
    "deleted_rows": "total-position-deletes",
    "delete_files": "total-delete-files",
}


def metadata_state(metadata: dict) -> dict:
    """A table's state as `table_states` gives it, from its metadata file (Iceberg's table metadata JSON):
    the snapshot `main` points at, the other branches, and the totals of main's snapshot summary."""
    refs = metadata.get("refs")
    if refs is None:  # written before branches existed: main is the current snapshot
        current = metadata.get("current-snapshot-id")
        refs = {} if current in (None, -1) else {"main": {"snapshot-id": current, "type": "branch"}}
    state = {"snapshot": None, "branches": [], "bytes": 0, "layout": None}
    for name, ref in refs.items():
        if name == "main":
            state["snapshot"] = int(ref["snapshot-id"])
        elif str(ref.get("type", "")).lower() == "branch":
            state["branches"].append(name)
    if state["snapshot"] is not None:
        summary = next(
            (
                s.get("summary") or {}
                for s in metadata.get("snapshots") or ()
                if s.get("snapshot-id") == state["snapshot"]
            ),
            None,
        )
        if summary is None:
            raise ValueError(f"snapshot {state['snapshot']} is not in the metadata file")
        state["bytes"] = int(summary.get(STATE_TOTALS["bytes"]) or 0)
        totals = {k: summary.get(v) for k, v in STATE_TOTALS.items() if k != "bytes"}
        if all(v is not None for v in totals.values()):
            state["layout"] = {k: int(v) for k, v in totals.items()}
    return state


def states_from_metadata(locations: dict[str, str]) -> dict[str, dict]:
    """`table_states` without a statement, for the tables whose metadata file a listing named (key ->
    its location): each file read from the warehouse's storage (local or S3). A table whose file cannot
    be read or understood is left out (the caller asks Spark for it)."""
    import gzip
    import json

    from python_hooks.project.storage import location

    states = {}
    for key, where in locations.items():
        try:
            with location(where).open() as handle:
                data = handle.read()
            if where.endswith(".gz.metadata.json"):
                data = gzip.decompress(data)
            states[key] = metadata_state(json.loads(data))
        except Exception as error:  # noqa: BLE001 - only a shortcut: Spark reads this table's state
            log.debug("the state of %s from its metadata file %s: %s", key, where, error)
    return states


def table_states(warehouse: Warehouse, relations: dict[str, str]) -> dict[str, dict]:
    """What each batch needs to know of its table before it starts, for many tables in one query (key ->
    relation): the snapshot `main` points at (None without one), the names of its branches, the bytes of
    its data files and its delete layout then (data rows, position-deleted rows, delete files; None when
    the summary lacks them), as cdc_table_state returns it."""
    if not relations:
        return {}
    totals = ", ".join(f"snapshots.summary[{sql_string(total)}]" for total in STATE_TOTALS.values())
    parts = [
        f"select {sql_string(key)}, refs.name, refs.type, refs.snapshot_id, {totals}"
        f" from {relation}.refs as refs left join {relation}.snapshots as snapshots"
        " on refs.snapshot_id = snapshots.snapshot_id"
        for key, relation in relations.items()
    ]
    states = {key: {"snapshot": None, "branches": [], "bytes": 0, "layout": None} for key in relations}
    for key, name, kind, snapshot, size, data_rows, deleted_rows, delete_files in warehouse.query(
        " union all ".join(parts)
    ):
        state = states[key]
        if name == "main":
            state.update(snapshot=int(snapshot), bytes=int(size or 0))
            if data_rows is not None and deleted_rows is not None and delete_files is not None:
                layout = {"data_rows": data_rows, "deleted_rows": deleted_rows, "delete_files": delete_files}
                state["layout"] = {k: int(v) for k, v in layout.items()}
        elif str(kind).upper() == "BRANCH":
            state["branches"].append(name)
    return states
