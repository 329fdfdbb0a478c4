"""Where each current-state table stands, from the batch log (`<schema>_cdc_meta.cdc_batch_log`,
macros/cdc/batch_log.sql): what `python -m python_hooks status` (`make status`) prints, the table
that ends `make run` (`run_table`, from that run's rows only) and `make demo`, and `status --plot`.

Per table: rows now (a live count), the last run that applied a batch and its counts, the lag
(now minus the newest source commit the table holds), the raw files waiting (listed in the landing
folder, not in the ledger), files refused (the newest batch, when it was refused), and the last
schema change the hooks made. The state is `refused` when the newest batch was refused, `error` /
`warn` when the lag passes the source's freshness `error_after` / `warn_after`, else `ok`; `status`
exits 1 on `refused` or `error`, so a scheduler can alert on it.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from python_hooks.commands.summary import WHAT_TO_DO
from python_hooks.landing.pending import pending_files
from python_hooks.project.meta import BATCH_LOG, IGNORED_COUNTERS, SCHEMA_EVOLUTION_LOG
from python_hooks.project.session import Session, SessionError
from python_hooks.project.sql import quoted_relation, relation_parts, sql_string
from python_hooks.project.storage import StorageError
from python_hooks.project.tables import cdc_tables
from python_hooks.project.warehouse import Warehouse
from python_hooks.sources.add_source import TRUNCATES_NOT_SEEN

log = logging.getLogger("python_hooks.status")

PERIOD_SECONDS = {"minute": 60, "hour": 3600, "day": 86400}


@dataclass
class TableStatus:
    model: str
    source: str
    rows: int | None  # None: the table does not exist yet
    last: dict | None  # the newest applied batch log row
    refused: dict | None  # the newest batch log row, when refused
    lag_seconds: float | None
    files_waiting: int | None
    schema_change: tuple | None  # (column, action, new type, applied_at)
    warn_after: float | None
    error_after: float | None
    producer: str = ""  # python_hooks/project/producers.py: dms, debezium_flattened, debezium_envelope

    @property
    def truncates_seen(self) -> bool:
        """False for a flattened Debezium topic: ExtractNewRecordState drops truncate events."""
        return self.producer != "debezium_flattened"

    @property
    def state(self) -> str:
        if self.refused is not None:
            return "refused"
        if self.lag_seconds is not None and self.error_after is not None and self.lag_seconds > self.error_after:
            return "error"
        if self.lag_seconds is not None and self.warn_after is not None and self.lag_seconds > self.warn_after:
            return "warn"
        return "ok" if self.rows is not None else "not built"


def ignored(row: dict) -> int:
    return sum(int(row.get(name) or 0) for name in IGNORED_COUNTERS)


def duration(seconds: float | None) -> str:
    """A lag for people: 42 s, 12 min, 3 h 05 min, 5 d 02 h."""
    if seconds is None:
        return "-"
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min"
    if seconds < 86400:
        return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"
    return f"{seconds // 86400} d {seconds % 86400 // 3600:02d} h"


def _threshold(freshness, name: str) -> float | None:
    after = getattr(freshness, name, None) if freshness is not None else None
    if after is None or not getattr(after, "count", None) or not getattr(after, "period", None):
        return None
    period = after.period.value if hasattr(after.period, "value") else str(after.period)
    return after.count * PERIOD_SECONDS[period]


def _freshness(manifest, table) -> tuple[float | None, float | None]:
    for source in manifest.sources.values():
        if source.source_name == table.source_name and source.name == table.table_name:
            return _threshold(source.freshness, "warn_after"), _threshold(source.freshness, "error_after")
    return None, None


def log_rows(warehouse: Warehouse, where: str = "true") -> list[dict]:
    """cdc_batch_log rows as dicts, oldest first ([] before the first run)."""
    if not warehouse.table_exists(warehouse.meta_schema, BATCH_LOG):
        return []
    relation = quoted_relation(warehouse.meta_schema, BATCH_LOG)
    return warehouse.records(f"select * from {relation} where {where} order by started_at")


def newest_rows(warehouse: Warehouse) -> dict[str, dict]:
    """Per model (lower case), from cdc_batch_log in one query whose result does not grow with the
    log's history: `last` (its newest applied row), `newest` (its newest row, applied or refused)
    and `newest_commit` (the newest source commit any applied batch held)."""
    if not warehouse.table_exists(warehouse.meta_schema, BATCH_LOG):
        return {}
    relation = quoted_relation(warehouse.meta_schema, BATCH_LOG)
    newest_first = "partition by lower(model_name) order by started_at desc"
    rows = warehouse.records(
        f"select * from ("
        f" select *, 'last' as _kind, row_number() over ({newest_first}) as _ranked,"
        f" max(newest_commit_at) over (partition by lower(model_name)) as _newest_commit"
        f" from {relation} where status = 'applied'"
        f" union all"
        f" select *, 'newest' as _kind, row_number() over ({newest_first}) as _ranked,"
        f" cast(null as timestamp) as _newest_commit from {relation}"
        f") as ranked_rows where _ranked = 1"
    )
    found: dict[str, dict] = {}
    for row in rows:
        kind, newest_commit = row.pop("_kind"), row.pop("_newest_commit")
        row.pop("_ranked")
        entry = found.setdefault(row["model_name"].lower(), {"last": None, "newest": None, "newest_commit": None})
        entry[kind] = row
        if kind == "last":
            entry["newest_commit"] = newest_commit
    return found


def _live_rows(warehouse: Warehouse, tables) -> dict[str, int]:
    return count_rows(warehouse, [t for t in tables if warehouse.table_exists(t.schema, t.identifier)])


def count_rows(warehouse: Warehouse, tables) -> dict[str, int]:
    """model -> count(*) of each table of `tables` (which exist), in one query."""
    if not tables:
        return {}
    counts = " union all ".join(
        f"select {sql_string(t.model)}, count(*) from {quoted_relation(t.schema, t.identifier)}" for t in tables
    )
    return {model: int(n) for model, n in warehouse.query(counts)}


def _schema_changes(warehouse: Warehouse) -> dict[str, tuple]:
    if not warehouse.table_exists(warehouse.meta_schema, SCHEMA_EVOLUTION_LOG):
        return {}
    newest: dict[str, tuple] = {}
    for table_name, column, action, new_type, applied_at in warehouse.query(
        f"select table_name, column_name, action, new_type, applied_at"
        f" from {quoted_relation(warehouse.meta_schema, SCHEMA_EVOLUTION_LOG)} order by applied_at"
    ):
        # table_name as the hooks quote it: `schema`.`table`
        newest[relation_parts(table_name)[-1].lower()] = (column, action, new_type, applied_at)
    return newest


def now_utc() -> dt.datetime:
    """Now, as the naive UTC timestamps the warehouse returns (the session time zone is UTC)."""
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)


def collect(warehouse: Warehouse, manifest, now: dt.datetime | None = None) -> list[TableStatus]:
    """The status of every current-state model of the project."""
    now = now or now_utc()
    tables = cdc_tables(manifest)
    rows = _live_rows(warehouse, tables)
    waiting = pending_files(warehouse, tables)
    changes = _schema_changes(warehouse)
    logged = newest_rows(warehouse)
    statuses = []
    for table in tables:
        entry = logged.get(table.identifier.lower(), {})
        last, newest, newest_commit = entry.get("last"), entry.get("newest"), entry.get("newest_commit")
        warn_after, error_after = _freshness(manifest, table)
        statuses.append(
            TableStatus(
                model=table.model,
                source=table.source,
                rows=rows.get(table.model),
                last=last,
                refused=newest if newest is not None and newest["status"] == "refused" else None,
                lag_seconds=(now - newest_commit).total_seconds() if newest_commit else None,
                files_waiting=waiting.get(table.model),
                schema_change=changes.get(table.identifier.lower()),
                warn_after=warn_after,
                error_after=error_after,
                producer=table.producer,
            )
        )
    return statuses


def _when(value: dt.datetime | None) -> str:
    return f"{value:%Y-%m-%d %H:%M:%S} UTC" if value else "-"


def render(statuses: Sequence[TableStatus]) -> list[str]:
    """The status, a block per table; refusals and what to do last."""
    lines = []
    for s in statuses:
        rows = "not built yet" if s.rows is None else f"{s.rows} rows"
        lines.append(f"{s.model} ({s.source}): {s.state.upper()}, {rows}, lag {duration(s.lag_seconds)}")
        if s.last:
            last = s.last
            lines.append(
                f"  last run {last['run_id'][:8]} at {_when(last['finished_at'])} ({last['seconds']:.1f} s):"
                f" {last['files']} file(s), {last['change_events']} change(s) -> {last['rows_inserted']} inserted,"
                f" {last['rows_updated']} updated, {last['rows_deleted']} deleted, {ignored(last)} ignored"
                f" ({last['ignored_older']} older, {last['ignored_redelivered']} re-delivered,"
                f" {last['ignored_tombstoned']} tombstoned, {last['ignored_truncated']} truncated)"
            )
        else:
            lines.append("  no batch applied yet")
        waiting = "?" if s.files_waiting is None else str(s.files_waiting)
        refused = s.refused["files_refused"] if s.refused else 0
        change = "none"
        if s.schema_change:
            column, action, new_type, applied_at = s.schema_change
            change = f"{action} {column} {new_type} at {_when(applied_at)}"
        thresholds = (
            f"warn after {duration(s.warn_after)}, error after {duration(s.error_after)}"
            if s.warn_after or s.error_after
            else "no freshness threshold"
        )
        lines.append(f"  files waiting {waiting}, files refused {refused}, last schema change: {change}; {thresholds}")
        if not s.truncates_seen:
            lines.append(f"  {TRUNCATES_NOT_SEEN}")
    problems = [s for s in statuses if s.state in ("refused", "error")]
    for s in problems:
        if s.state == "refused":
            lines.append(f"REFUSED {s.model} at {_when(s.refused['finished_at'])}: {s.refused['refusal']}")
        else:
            lines.append(
                f"STALE {s.model}: its newest change is {duration(s.lag_seconds)} old (error after"
                f" {duration(s.error_after)}): is the producer delivering? `dbt source freshness` shows the"
                " raw files' side"
            )
    if any(s.state == "refused" for s in problems):
        lines.append(WHAT_TO_DO)
    lines.append(
        f"{len(statuses)} table(s): "
        + ", ".join(
            f"{n} {state}"
            for state in ("ok", "warn", "error", "refused", "not built")
            if (n := sum(s.state == state for s in statuses))
        )
    )
    return lines


def exit_code(statuses: Sequence[TableStatus]) -> int:
    return 1 if any(s.state in ("refused", "error") for s in statuses) else 0


HEADER = ("table", "inserted", "updated", "deleted", "ignored", "refused", "lag")


def run_table(models: Sequence[str], run_rows: Sequence[dict], now: dt.datetime) -> list[str]:
    """The short table that ends a run: one line per current-state table of `models` this run has a row for
    (`run_rows`: what each batch logged, by the batch log's column names, macros/cdc/batch_log.sql:
    cdc_run_table_row, and the tables the hooks refused): what the run did to it, and how old the newest
    change of its batch is; then how many had no batch (nothing new, or not built). It reads no table:
    a table's rows are `status`'s (a count of the whole table, which a run of hundreds of tables would pay
    at every run)."""
    by_model = {row["model_name"].lower(): row for row in run_rows}
    logged = [model for model in models if model.lower() in by_model]
    if not logged:
        return [f"  no batch this run for its {len(models)} current-state table(s)"]
    width = max([len(HEADER[0]), *(len(model) for model in logged)])
    lines = [f"  {HEADER[0]:<{width}} " + " ".join(f"{h:>8}" for h in HEADER[1:-1]) + f"  {HEADER[-1]}"]
    for model in logged:
        row = by_model[model.lower()]
        if row["status"] == "refused":
            counts, lag = ["0", "0", "0", "0", str(row["files_refused"])], None
        else:
            counts = [
                str(row["rows_inserted"]),
                str(row["rows_updated"]),
                str(row["rows_deleted"]),
                str(ignored(row)),
                "0",
            ]
            newest = row.get("newest_commit_at")
            if isinstance(newest, str):  # the batch's line says it as text (Spark's, in the session's time zone: UTC)
                newest = dt.datetime.fromisoformat(newest)
            lag = (now - newest).total_seconds() if newest is not None else None
        lines.append(f"  {model:<{width}} " + " ".join(f"{v:>8}" for v in counts) + f"  {duration(lag)}")
    if len(logged) < len(models):
        lines.append(f"  and {len(models) - len(logged)} other current-state table(s): no batch this run")
    return lines


def plot(rows: Sequence[dict], path: Path) -> Path:
    """Per table, over time: the lag at each batch and the changes it applied (rows inserted,
    updated, deleted). A PNG at `path`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    applied = [row for row in rows if row["status"] == "applied"]
    models = sorted({row["model_name"] for row in applied})
    if not models:
        raise ValueError("the batch log has no applied batch yet: nothing to plot (run the pipeline first)")
    figure, (lag_axis, changes_axis) = plt.subplots(2, 1, figsize=(10, 7), sharex=True)
    for model in models:
        mine = [row for row in applied if row["model_name"] == model]
        times = [row["finished_at"] for row in mine]
        lag_axis.plot(times, [(row["lag_seconds"] or 0) / 3600 for row in mine], marker="o", label=model)
        changes_axis.plot(
            times,
            [row["rows_inserted"] + row["rows_updated"] + row["rows_deleted"] for row in mine],
            marker="o",
            label=model,
        )
    lag_axis.set_ylabel("lag at apply (hours)")
    lag_axis.set_title("CDC batches per table (cdc_batch_log)")
    changes_axis.set_ylabel("rows changed per run")
    changes_axis.set_xlabel("run finished (UTC)")
    lag_axis.legend(fontsize="small")
    for axis in (lag_axis, changes_axis):
        axis.grid(True, alpha=0.3)
    figure.autofmt_xdate()
    figure.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def run_status(dbt_args: Sequence[str], plot_path: Path | None, echo=print) -> int:
    """`python -m python_hooks status`: the status of every table, the plot if asked; the exit code
    (2 when the project cannot be parsed, the warehouse not reached or a landing folder not listed)."""
    try:
        session = Session.start(dbt_args)
    except SessionError as error:
        log.error("%s", error)
        return 2
    with session:
        try:
            statuses = collect(session.warehouse, session.manifest)
        except StorageError as error:  # a landing folder on S3 that cannot be listed: say what to check
            log.error("%s", error)
            return 2
        rows = log_rows(session.warehouse) if plot_path else []
    for line in render(statuses):
        echo(line)
    if plot_path:
        try:
            echo(f"plot: {plot(rows, plot_path)}")
        except ValueError as error:
            echo(f"plot: not drawn: {error}", err=True)
    return exit_code(statuses)
