"""`make docs` (`python -m python_hooks docs`): the dbt docs site, with live row counts, then the
docs coverage check. One process, because the embedded target opens one Spark session at a time:

1. `dbt parse`, then `dbt docs generate --no-compile --static` (dbtRunner, in this process; the
   session's temporary views dropped first, `drop_temporary_views`);
2. through the same adapter (python_hooks/project/warehouse.py, so on every target): `select count(*)` of
   every relation the catalog lists as a table, written into catalog.json's row-count stat. dbt-spark
   shows the metastore's numRows there, which for an Iceberg table is the snapshot summary's
   total-records: it still counts the rows merge-on-read position deletes removed;
3. the columns schema evolution added (`<schema>_cdc_meta.schema_evolution_log`), written to
   `<target>/cdc_schema_evolution.json` for the coverage check;
4. target/static_index.html rebuilt from target/index.html with the patched catalog, exactly as
   `dbt docs generate --static` builds it (dbt/task/docs/generate.py);
5. the coverage check (python_hooks/commands/docs_coverage.py; the rules: scripts/check_docs_coverage.py):
   a gap fails (exit 1), a column schema evolution added and no yml lists yet is a warning.

A warehouse that was never built (a fresh clone, CI) is fine: nothing to count, no evolution log.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from python_hooks.commands.docs_coverage import EVOLUTION_FILE, AddedColumn, check, report
from python_hooks.project import env
from python_hooks.project.dbt_args import dbt_option, project_dir_of
from python_hooks.project.meta import SCHEMA_EVOLUTION_LOG
from python_hooks.project.session import SessionError, dbt_runner, parse
from python_hooks.project.sql import quote_ident, quoted_relation
from python_hooks.project.warehouse import Warehouse

log = logging.getLogger(__name__)

ROWS_STAT = "rows"  # dbt-spark: "Statistics: <n> bytes, <n> rows" -> stats "bytes" and "rows"
ROWS_LABEL = "Row count (live rows, counted at docs generation)"
MANIFEST_PLACEHOLDER = '"MANIFEST.JSON INLINE DATA"'
CATALOG_PLACEHOLDER = '"CATALOG.JSON INLINE DATA"'


# ------------------------------------------------------------------------- live counts, the site


@dataclass
class Count:
    unique_id: str
    relation: str
    live: int | None  # None: the count failed (error)
    metastore: int | None
    error: str | None = None


def catalog_tables(catalog: dict, manifest: dict, project: str) -> Iterator[tuple[str, str, str]]:
    """(unique_id, schema, name) of every relation of the project the catalog lists as a table."""
    declared = {**manifest["nodes"], **manifest["sources"]}
    for unique_id, entry in sorted({**catalog.get("nodes", {}), **catalog.get("sources", {})}.items()):
        node = declared.get(unique_id)
        metadata = entry.get("metadata", {})
        if node is None or node["package_name"] != project or str(metadata.get("type", "")).lower() != "table":
            continue
        yield unique_id, metadata["schema"], metadata["name"]


def _stat_value(entry: dict, stat: str) -> int | None:
    value = entry.get("stats", {}).get(stat, {}).get("value")
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def count_rows(warehouse, catalog: dict, manifest: dict, project: str) -> list[Count]:
    """select count(*) of every table the catalog lists."""
    entries = {**catalog.get("nodes", {}), **catalog.get("sources", {})}
    counts = []
    for unique_id, schema, name in catalog_tables(catalog, manifest, project):
        relation = quoted_relation(schema, name)
        metastore = _stat_value(entries[unique_id], ROWS_STAT)
        try:
            live = int(warehouse.query(f"select count(*) from {relation}")[0][0])
        except Exception as error:  # one table's failure must not hide the others
            counts.append(Count(unique_id, f"{schema}.{name}", None, metastore, str(error).splitlines()[0][:200]))
            continue
        counts.append(Count(unique_id, f"{schema}.{name}", live, metastore))
    return counts


def patch_catalog(catalog: dict, counts: Iterable[Count], counted_at: dt.datetime) -> dict:
    """The catalog with each counted table's row-count stat replaced by its live rows (in place)."""
    for count in counts:
        if count.live is None:
            continue
        entry = catalog.get("nodes", {}).get(count.unique_id) or catalog["sources"][count.unique_id]
        stats = entry.setdefault("stats", {})
        was = (
            f" The metastore's numRows said {count.metastore}: Iceberg's snapshot summary (total-records), which"
            " still counts the rows merge-on-read deletes removed."
            if count.metastore is not None and count.metastore != count.live
            else ""
        )
        stats[ROWS_STAT] = {
            "id": ROWS_STAT,
            "label": ROWS_LABEL,
            "value": count.live,
            "include": True,
            "description": f"select count(*) at {counted_at:%Y-%m-%d %H:%M:%S} UTC (python -m python_hooks docs).{was}",
        }
        has_stats = stats.get("has_stats")
        if has_stats is not None:
            has_stats["value"] = True
    return catalog


def write_static_index(target: Path) -> Path:
    """target/static_index.html from target/index.html with manifest.json and catalog.json inlined,
    as `dbt docs generate --static` does (dbt/task/docs/generate.py: load_file_contents strips)."""
    from dbt_common.clients.system import load_file_contents

    index_data = load_file_contents(str(target / "index.html"))
    index_data = index_data.replace(MANIFEST_PLACEHOLDER, load_file_contents(str(target / "manifest.json")))
    index_data = index_data.replace(CATALOG_PLACEHOLDER, load_file_contents(str(target / "catalog.json")))
    path = target / "static_index.html"
    with open(path, "wb") as static_index_file:
        static_index_file.write(bytes(index_data, "utf8"))
    return path


def added_columns(warehouse) -> list[AddedColumn] | None:
    """The columns schema evolution added, earliest first; None when the log does not exist."""
    if not warehouse.table_exists(warehouse.meta_schema, SCHEMA_EVOLUTION_LOG):
        return None
    rows = warehouse.query(
        f"select table_name, column_name, cast(min(applied_at) as string) as applied_at"
        f" from {quoted_relation(warehouse.meta_schema, SCHEMA_EVOLUTION_LOG)} where action = 'add_column'"
        f" group by table_name, column_name order by applied_at, table_name, column_name"
    )
    return [AddedColumn(table, column, applied_at or "") for table, column, applied_at in rows]


def drop_temporary_views(warehouse) -> list[str]:
    """Drops the session's temporary views (what an earlier command of this process left, e.g. a
    pipeline run's batch views, macros/cdc/current_state.sql): `show table extended in <schema> like
    '*'`, which dbt-spark's catalog runs, lists them in every schema with an empty namespace, which dbt
    reads as schema None and fails on ('NoneType' object has no attribute 'lower'). A process that
    only builds the docs has none."""
    names = sorted(row[1] for row in warehouse.query("show views") if row[2])
    for name in names:
        warehouse.execute(f"drop view if exists {quote_ident(name)}")
    return names


def target_path(dbt_args: Sequence[str]) -> Path:
    """Where dbt writes its artifacts: --target-path, DBT_TARGET_PATH or the project's `target`,
    relative to the project directory (dbt's project_target_path)."""
    project_dir = Path(project_dir_of(dbt_args) or env.PROJECT_ROOT)
    path = dbt_option(dbt_args, "--target-path") or os.environ.get("DBT_TARGET_PATH") or "target"
    return project_dir / path


def _relative(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def build_docs(dbt_args: Sequence[str] = (), runner=None, echo=print) -> int:
    """`make docs`; `dbt_args` go to every dbt command (--target, --project-dir, --target-path...).
    0 when the site is built and the check finds no gap; 1 otherwise."""
    runner = runner if runner is not None else dbt_runner()
    dbt_args = list(dbt_args)
    try:
        parse(runner, dbt_args)
    except SessionError as error:
        echo(f"docs: {error}")
        return 1
    target = target_path(dbt_args)
    (target / "catalog.json").unlink(missing_ok=True)  # never patch an older one
    with Warehouse.open(dbt_args) as warehouse:
        dropped = drop_temporary_views(warehouse)
    if dropped:
        log.info("dropped this session's temporary views before dbt docs generate: %s", ", ".join(dropped))
    generated = runner.invoke(["docs", "generate", "--no-compile", "--static", "--quiet", *dbt_args])
    if generated.exception is not None or not (target / "catalog.json").is_file():
        echo(f"docs: dbt docs generate failed (no {target}/catalog.json): {generated.exception or 'see above'}")
        return 1
    manifest = json.loads((target / "manifest.json").read_text())
    catalog = json.loads((target / "catalog.json").read_text())
    project = manifest["metadata"].get("project_name") or "cdc_lakehouse"
    counted_at = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    with Warehouse.open(dbt_args) as warehouse:
        echo(
            f"docs: target {warehouse.target}, schema {warehouse.schema},"
            f" warehouse {os.environ.get('CDC_WAREHOUSE', '?')}"
        )
        counts = count_rows(warehouse, catalog, manifest, project)
        added = added_columns(warehouse)
        log_table = f"{warehouse.meta_schema}.schema_evolution_log"
    patch_catalog(catalog, counts, counted_at)
    (target / "catalog.json").write_text(json.dumps(catalog), encoding="utf-8")
    (target / EVOLUTION_FILE).write_text(
        json.dumps(
            {"schema_evolution_log": log_table, "added_columns": [vars(column) for column in added or []]}, indent=1
        ),
        encoding="utf-8",
    )
    site = write_static_index(target)

    if not counts and added is None:
        echo("docs: the warehouse has not been built yet: no table to count, no schema evolution log")
    else:
        differing = [c for c in counts if c.live is not None and c.metastore is not None and c.live != c.metastore]
        echo(
            f"docs: live row counts (select count(*)) of {sum(c.live is not None for c in counts)} table(s)"
            f" written into {_relative(target / 'catalog.json')}"
            + (
                f"; the metastore's numRows differed for {len(differing)}: "
                + ", ".join(f"{c.relation} {c.metastore} -> {c.live}" for c in differing)
                if differing
                else ""
            )
        )
        for count in counts:
            if count.live is None:
                echo(f"docs: could not count {count.relation} (its metastore figure is kept): {count.error}")
        if added is None:
            echo(f"docs: no schema evolution log ({log_table}) yet")
        else:
            echo(f"docs: {len(added)} column(s) added by schema evolution ({log_table})")
    coverage = check(target, added or [])
    for line in report(coverage, Path(_relative(target))):
        echo(line)
    echo(
        f"docs: site {_relative(target / 'index.html')} (make docs-serve) and {_relative(site)}"
        " (a single file: open it in a browser)"
    )
    if not generated.success:
        echo(f"docs: dbt docs generate reported errors: {generated.exception or 'see above'}")
    return 0 if coverage.ok else 1
