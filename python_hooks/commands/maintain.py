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
than any run. On the embedded target the warehouse is one process's (python_hooks/project/embedded_lock.py):
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
from pathlib import Path

from python_hooks.project import embedded_lock, env
from python_hooks.project.dbt_args import dbt_option
from python_hooks.project.iceberg import (
    MIN_ORPHAN_INTERVAL,
    ORPHAN_INTERVAL,
    Expiry,
    bound_metadata_files,
    expire_snapshots,
    is_iceberg_table,
    remove_orphan_files,
    rewrite_manifests,
    snapshot_ids,
    utc,
    warehouse_location,
)
from python_hooks.project.session import Session, SessionError
from python_hooks.project.sql import quoted_relation
from python_hooks.project.tables import CURRENT_STATE, TABLE_MATERIALIZATIONS
from python_hooks.project.warehouse import Warehouse

log = logging.getLogger(__name__)


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
        return quoted_relation(self.schema, self.identifier)


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
        elif config.get("materialized") == CURRENT_STATE:
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


# ---------------------------------------------------------------- the whole warehouse


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
    now = utc(now or dt.datetime.now(dt.timezone.utc))
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
        try:
            session = Session.start(dbt_args)
        except SessionError as error:
            log.error("%s", error)
            return False
        with session:
            try:
                embedded_lock.acquire_for_adapter(session.warehouse.adapter)
            except embedded_lock.WarehouseInUse as error:
                log.error("maintenance refused: %s", error)
                return False
            try:
                report = maintain(
                    session.warehouse,
                    session.manifest,
                    runner=session.runner,
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
