"""Table maintenance, `python -m python_hooks maintain` (`make maintain`): what keeps the warehouse
from growing without bound, and deleted data from staying readable in old snapshots forever.

For every Iceberg table of the project (the current-state, history, intermediate and mart models
that are tables, the dbt snapshots, and the pipeline's own tables in `<schema>_cdc_meta`), in this
order, each step its own Iceberg commit:

1. compaction of the current-state tables that have delete files: the existing
   `cdc_compact_current_state` operation (macros/cdc/maintenance.sql), run through dbt;
2. `rewrite_manifests`: one manifest per ~8 MB instead of one or more per commit;
3. the table's old metadata files bounded (`write.metadata.delete-after-commit.enabled`, keeping
   `metadata_versions` of them), set once;
4. `expire_snapshots`: snapshots older than the model's retention are dropped, but never the last
   `keep_last`; Iceberg deletes the data, delete and manifest files no retained snapshot needs;
5. `remove_orphan_files`: files under the table's folder that no metadata refers to and that are
   older than the safety interval (3 days; Iceberg's procedure refuses less than 24 hours).

The retention is model config (dbt_project.yml; the pipeline's own tables take the default):

    +cdc_retention:
      days: 7              # time travel (`version as of`) back this far is kept
      keep_last: 10        # and at least this many snapshots, however old
      metadata_versions: 20

Beside a running pipeline (cluster target): every step but orphan removal is an optimistic Iceberg
commit (a commit that loses a race is retried or fails, never overwrites); orphan removal is safe
because a writer's uncommitted files are younger than the interval, which must therefore be longer
than any run. On the embedded target the warehouse is one process's (python_hooks/embedded_lock.py):
maintenance waits for nothing and is refused in one line while another process has it.

`maintenance_targets` plans (no Spark); `maintain` applies the plan and returns a report;
`expire_snapshots` and `remove_orphan_files` are the two steps for one table (erasure uses them).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field

from python_hooks.schema_plan import quote_ident, sql_string
from python_hooks.warehouse import Warehouse

log = logging.getLogger(__name__)

# Iceberg's own default for remove_orphan_files (DeleteOrphanFiles' olderThan); its SQL procedure
# refuses anything under MIN_ORPHAN_INTERVAL.
ORPHAN_INTERVAL = dt.timedelta(days=3)
MIN_ORPHAN_INTERVAL = dt.timedelta(hours=24)
# Materializations that make an Iceberg table (views and ephemeral models hold no data).
TABLE_MATERIALIZATIONS = {"table", "incremental", "snapshot"}


@dataclass(frozen=True)
class Retention:
    """How much history a table keeps: snapshots newer than `days`, and at least `keep_last`."""

    days: float = 7
    keep_last: int = 10
    metadata_versions: int = 20

    @classmethod
    def from_config(cls, value: object, where: str, default: Retention | None = None) -> Retention:
        """The `cdc_retention` config of a model (None: `default`); ValueError naming `where`."""
        base = default or cls()
        if value is None:
            return base
        if not isinstance(value, dict):
            raise ValueError(f"{where}: cdc_retention must be a mapping like {{days: 7, keep_last: 10}}, got {value!r}")
        unknown = set(value) - {"days", "keep_last", "metadata_versions"}
        if unknown:
            raise ValueError(f"{where}: cdc_retention has unknown key(s) {sorted(unknown)}")
        days = value.get("days", base.days)
        keep_last = value.get("keep_last", base.keep_last)
        versions = value.get("metadata_versions", base.metadata_versions)
        if isinstance(days, bool) or not isinstance(days, int | float) or days < 0:
            raise ValueError(f"{where}: cdc_retention.days must be a number >= 0, got {days!r}")
        for name, number in (("keep_last", keep_last), ("metadata_versions", versions)):
            if isinstance(number, bool) or not isinstance(number, int) or number < 1:
                raise ValueError(f"{where}: cdc_retention.{name} must be an integer >= 1, got {number!r}")
        return cls(days=days, keep_last=keep_last, metadata_versions=versions)


@dataclass(frozen=True)
class MaintenanceTarget:
    """One table to maintain."""

    schema: str
    identifier: str
    kind: str  # current_state | table | snapshot | meta
    retention: Retention
    model: str | None = None  # the dbt node's name (current-state models are compacted by name)

    @property
    def name(self) -> str:
        return f"{self.schema}.{self.identifier}"

    @property
    def relation(self) -> str:
        """The name with each part quoted, as the steps take it (any legal name)."""
        return f"{quote_ident(self.schema)}.{quote_ident(self.identifier)}"


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


@dataclass
class TableReport:
    table: str
    kind: str
    skipped: str | None = None
    error: str | None = None
    compacted: bool = False
    manifests_rewritten: int = 0
    metadata_bounded: bool = False
    expiry: Expiry | None = None
    orphans_removed: int = 0

    def line(self) -> str:
        if self.skipped:
            return f"{self.table}: skipped ({self.skipped})"
        parts = []
        if self.expiry is not None:
            parts.append(
                f"{self.expiry.snapshots_expired} snapshot(s) expired, {self.expiry.snapshots_kept} kept, "
                f"{self.expiry.files_deleted} file(s) deleted"
            )
        parts.append(f"{self.orphans_removed} orphan file(s) removed")
        parts.append(f"{self.manifests_rewritten} manifest(s) rewritten")
        if self.kind == "current_state":
            parts.append("compacted" if self.compacted else "not compacted (no delete files)")
        if self.metadata_bounded:
            parts.append("old metadata files now bounded")
        text = f"{self.table}: " + ", ".join(parts)
        return f"{text}; FAILED: {self.error}" if self.error else text


@dataclass
class MaintenanceReport:
    target: str
    warehouse: str
    tables: list[TableReport] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(t.error for t in self.tables)

    def summary(self) -> str:
        done = [t for t in self.tables if not t.skipped]
        expired = sum(t.expiry.snapshots_expired for t in done if t.expiry)
        deleted = sum(t.expiry.files_deleted for t in done if t.expiry)
        failed = [t.table for t in done if t.error]
        text = (
            f"maintained {len(done) - len(failed)} table(s) on target {self.target}, warehouse {self.warehouse}: "
            f"{expired} snapshot(s) expired, {deleted + sum(t.orphans_removed for t in done)} file(s) deleted "
            f"({sum(t.orphans_removed for t in done)} orphan), "
            f"{sum(t.manifests_rewritten for t in done)} manifest(s) rewritten, "
            f"{sum(t.compacted for t in done)} table(s) compacted; "
            f"{len(self.tables) - len(done)} skipped"
        )
        return f"{text}; FAILED: {', '.join(failed)}" if failed else text


# ---------------------------------------------------------------- the plan (no Spark)


def maintenance_targets(
    manifest, meta_schema: str, meta_tables: Iterable[str] = (), default: Retention | None = None
) -> list[MaintenanceTarget]:
    """Every table of the project to maintain, from the dbt manifest (models materialized as Iceberg
    tables, snapshots) and the pipeline's own tables (`meta_tables` of `meta_schema`), with each
    one's retention. Raises ValueError naming the model when its `cdc_retention` is malformed."""
    default = default or Retention()
    targets = []
    for node in manifest.nodes.values():
        if node.resource_type not in ("model", "snapshot"):
            continue
        config = node.config
        if config.get("materialized") not in TABLE_MATERIALIZATIONS or config.get("file_format") != "iceberg":
            continue
        if node.resource_type == "snapshot":
            kind = "snapshot"
        elif config.get("incremental_strategy") == "cdc_merge":
            kind = "current_state"
        else:
            kind = "table"
        retention = Retention.from_config(config.get("cdc_retention"), node.name, default)
        targets.append(MaintenanceTarget(node.schema, node.alias or node.name, kind, retention, node.name))
    targets.sort(key=lambda t: (t.schema, t.identifier))
    for identifier in sorted(meta_tables):
        targets.append(MaintenanceTarget(meta_schema, identifier, "meta", default))
    return targets


def retention_cutoff(now: dt.datetime, retention: Retention) -> dt.datetime:
    return now - dt.timedelta(days=retention.days)


# ---------------------------------------------------------------- the steps, one table each


def _utc(moment: dt.datetime) -> dt.datetime:
    """Aware UTC; a naive datetime is taken as UTC."""
    return moment.replace(tzinfo=dt.timezone.utc) if moment.tzinfo is None else moment.astimezone(dt.timezone.utc)


def _timestamp(moment: dt.datetime) -> str:
    """A Spark timestamp literal for an instant, with its offset (independent of the session's zone)."""
    return "timestamp " + sql_string(_utc(moment).strftime("%Y-%m-%d %H:%M:%S.%f") + "+00:00")


def split_relation(relation: str) -> tuple[str, str]:
    """`schema.table` (either part may be in backticks) -> (schema, table)."""
    parts, current, quoted, i = [], "", False, 0
    while i < len(relation):
        char = relation[i]
        if char == "`":
            if quoted and relation[i + 1 : i + 2] == "`":
                current += "`"
                i += 1
            else:
                quoted = not quoted
        elif char == "." and not quoted:
            parts.append(current)
            current = ""
        else:
            current += char
        i += 1
    parts.append(current)
    if len(parts) != 2 or not all(parts) or quoted:
        raise ValueError(f"{relation!r} is not a relation of the form schema.table")
    return parts[0], parts[1]


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
    interval = dt.datetime.now(dt.timezone.utc) - _utc(older_than)
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
    rows = warehouse.query(f"describe table extended {quote_ident(schema)}.{quote_ident(identifier)}")
    details = {str(row[0]).strip().lower(): str(row[1] or "").strip().lower() for row in rows if row[0]}
    return details.get("provider") == "iceberg" and details.get("type", "").lower() != "view"


# ---------------------------------------------------------------- the whole warehouse


def warehouse_location(warehouse: Warehouse) -> str:
    rows = warehouse.query("set spark.sql.warehouse.dir")
    return str(rows[0][1]) if rows else "?"


def maintain(
    warehouse: Warehouse,
    manifest,
    *,
    runner=None,
    dbt_args: Sequence[str] = (),
    now: dt.datetime | None = None,
    orphan_interval: dt.timedelta = ORPHAN_INTERVAL,
    retention: Retention | None = None,
    select: Collection[str] | None = None,
) -> MaintenanceReport:
    """Maintains every Iceberg table of the project (`maintenance_targets`) that exists: compaction
    of the current-state tables (through `runner`, a dbtRunner, with `dbt_args`; skipped without
    one), manifest rewrite, bounded metadata files, snapshot expiry by each table's retention
    (`retention` overrides every table's), orphan removal older than `orphan_interval`. `select`:
    only these tables ("schema.table", any case). A failing step is reported on its table's line
    and the next table goes on; every step leaves the table readable (each is one Iceberg commit,
    or deletes only files no retained snapshot needs)."""
    if orphan_interval < MIN_ORPHAN_INTERVAL:
        raise ValueError(
            f"the orphan-file safety interval must be at least 24 hours (asked: {orphan_interval}); "
            "Iceberg recommends 3 days, longer than any run that can write at the same time"
        )
    now = _utc(now or dt.datetime.now(dt.timezone.utc))
    report = MaintenanceReport(target=warehouse.target, warehouse=warehouse_location(warehouse))
    meta_tables = [
        t for t in warehouse.tables(warehouse.meta_schema) if is_iceberg_table(warehouse, warehouse.meta_schema, t)
    ]
    targets = maintenance_targets(manifest, warehouse.meta_schema, meta_tables)
    if select is not None:
        wanted = {name.lower() for name in select}
        targets = [t for t in targets if t.name.lower() in wanted]
    present = []
    for target in targets:
        if not warehouse.table_exists(target.schema, target.identifier):
            report.tables.append(TableReport(target.name, target.kind, skipped="not created yet"))
        elif target.kind != "meta" and not is_iceberg_table(warehouse, target.schema, target.identifier):
            report.tables.append(TableReport(target.name, target.kind, skipped="not an Iceberg table"))
        else:
            present.append(target)

    current_state = [t for t in present if t.kind == "current_state"]
    compacted, compaction_failed = _compact(warehouse, current_state, runner, dbt_args)
    for target in present:
        table = TableReport(target.name, target.kind, compacted=target.name in compacted)
        if compaction_failed and target in current_state:
            table.error = "compaction failed (dbt run-operation cdc_compact_current_state: see the dbt log)"
        keep = retention or target.retention
        try:
            table.manifests_rewritten = rewrite_manifests(warehouse, target.relation)
            table.metadata_bounded = bound_metadata_files(warehouse, target.relation, keep.metadata_versions)
            table.expiry = expire_snapshots(warehouse, target.relation, retention_cutoff(now, keep), keep.keep_last)
            table.orphans_removed = remove_orphan_files(warehouse, target.relation, now - orphan_interval)
        except Exception as error:  # noqa: BLE001 - reported on the table's line; the others go on
            message = " ".join(str(error).split())
            table.error = f"{table.error}; {message[:300]}" if table.error else message[:300]
            log.debug("%s: maintenance failed", target.name, exc_info=True)
        (log.error if table.error else log.info)("%s", table.line())
        report.tables.append(table)
    for table in report.tables:
        if table.skipped:
            log.debug("%s", table.line())
    skipped = [t.table for t in report.tables if t.skipped]
    if skipped:
        log.info("skipped (not created yet, or not Iceberg): %s", ", ".join(skipped))
    return report


def _compact(
    warehouse: Warehouse, targets: Sequence[MaintenanceTarget], runner, dbt_args: Sequence[str]
) -> tuple[set[str], bool]:
    """Runs `cdc_compact_current_state` (macros/cdc/maintenance.sql: every selected table with delete
    files) on the current-state tables. Returns (the tables it compacted: those with a new `replace`
    snapshot, whether the operation failed)."""
    if runner is None or not targets:
        return set(), False
    before = {t.name: set(snapshot_ids(warehouse, t.relation)) for t in targets}
    args = json.dumps({"select": [t.model for t in targets]})
    result = runner.invoke(["run-operation", "cdc_compact_current_state", "--args", args, *dbt_args])
    if not result.success:
        log.debug("cdc_compact_current_state failed: %s", result.exception)
        return set(), True
    compacted = set()
    for target in targets:
        rows = warehouse.query(f"select snapshot_id, operation from {target.relation}.snapshots")
        if any(operation == "replace" and sid not in before[target.name] for sid, operation in rows):
            compacted.add(target.name)
    return compacted, False


# ---------------------------------------------------------------- the command


def run_maintenance(dbt_args: Sequence[str] = (), orphan_interval: dt.timedelta = ORPHAN_INTERVAL) -> bool:
    """`python -m python_hooks maintain`: parse the project, take the embedded warehouse (local
    target; refused in one line while another process has it), maintain every table, log one line
    per table and a summary; details (each procedure call and its counts, the orphan files removed)
    go to `<log path>/maintain.log`. True when every table was maintained."""
    from pathlib import Path

    from dbt.cli.main import dbtRunner

    from python_hooks import embedded_lock, env
    from python_hooks.warehouse import dbt_option

    log_path = dbt_option(dbt_args, "--log-path") or os.environ.get("DBT_LOG_PATH") or env.PROJECT_ROOT / "logs"
    log_file = Path(log_path) / "maintain.log"
    log_file.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(log_file, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    for console in logging.getLogger().handlers:
        if console.level == logging.NOTSET:
            console.setLevel(logging.INFO)  # details to the file only
    log.addHandler(handler)
    log.setLevel(logging.DEBUG)
    try:
        runner = dbtRunner()
        parsed = runner.invoke(["parse", "--quiet", *dbt_args])
        if not parsed.success:
            log.error("dbt parse failed: see the errors above")
            return False
        with Warehouse.open(dbt_args) as warehouse:
            credentials = warehouse.adapter.config.credentials
            if str(getattr(credentials.method, "value", credentials.method)) == "session":
                embedded = embedded_lock._derby_warehouse(credentials.server_side_parameters or {})
                if embedded is not None:
                    try:
                        embedded_lock.acquire(embedded)
                    except embedded_lock.WarehouseInUse as error:
                        log.error("maintenance refused: %s", error)
                        return False
            try:
                report = maintain(
                    warehouse,
                    parsed.result,
                    runner=runner,
                    dbt_args=["--quiet", *dbt_args],
                    orphan_interval=orphan_interval,
                )
            except ValueError as error:  # a malformed cdc_retention, an interval under 24 h
                log.error("maintenance refused: %s", error)
                return False
        (log.info if report.ok else log.error)("%s; details in %s", report.summary(), log_file)
        return report.ok
    finally:
        log.removeHandler(handler)
        handler.close()
