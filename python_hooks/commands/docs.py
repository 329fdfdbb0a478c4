"""`make docs` (`python -m python_hooks docs`): the dbt docs site, with live row counts, then the
docs coverage check. One process, because the embedded target opens one Spark session at a time:

1. `dbt parse`, then `dbt docs generate --no-compile --static` (dbtRunner, in this process; the
   session's temporary views dropped first, `drop_temporary_views`);
2. through the same adapter (python_hooks/warehouse.py, so on every target): `select count(*)` of
   every relation the catalog lists as a table, written into catalog.json's row-count stat. dbt-spark
   shows the metastore's numRows there, which for an Iceberg table is the snapshot summary's
   total-records: it still counts the rows merge-on-read position deletes removed;
3. the columns schema evolution added (`<schema>_cdc_meta.schema_evolution_log`), written to
   `<target>/cdc_schema_evolution.json` for the coverage check;
4. target/static_index.html rebuilt from target/index.html with the patched catalog, exactly as
   `dbt docs generate --static` builds it (dbt/task/docs/generate.py);
5. the coverage check (the rules: scripts/check_docs_coverage.py, a thin wrapper of `main` below):
   a gap fails (exit 1), a column schema evolution added and no yml lists yet is a warning.

A warehouse that was never built (a fresh clone, CI) is fine: nothing to count, no evolution log.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from python_hooks.schema_plan import relation_parts

log = logging.getLogger(__name__)

DOCUMENTED_NODES = {"model", "snapshot", "seed"}
EVOLUTION_FILE = "cdc_schema_evolution.json"
ROWS_STAT = "rows"  # dbt-spark: "Statistics: <n> bytes, <n> rows" -> stats "bytes" and "rows"
ROWS_LABEL = "Row count (live rows, counted at docs generation)"
MANIFEST_PLACEHOLDER = '"MANIFEST.JSON INLINE DATA"'
CATALOG_PLACEHOLDER = '"CATALOG.JSON INLINE DATA"'


# ------------------------------------------------------------------------------ the coverage check


@dataclass(frozen=True)
class AddedColumn:
    """A column schema evolution added, as `schema_evolution_log` says (action add_column)."""

    table: str  # the relation as logged: `schema`.`identifier`
    column: str
    applied_at: str  # ISO timestamp

    @property
    def where(self) -> str:
        return ".".join([*relation_parts(self.table), self.column])


@dataclass
class Coverage:
    gaps: list[str] = field(default_factory=list)  # the check fails
    warnings: list[str] = field(default_factory=list)  # reported only

    @property
    def ok(self) -> bool:
        return not self.gaps


def _blank(text: str | None) -> bool:
    return not (text or "").strip()


def manifest_gaps(manifest: dict, project: str) -> Iterator[str]:
    """What the yml files leave undescribed."""
    for unique_id, node in sorted(manifest["nodes"].items()):
        if node["resource_type"] not in DOCUMENTED_NODES or node["package_name"] != project:
            continue
        if _blank(node.get("description")):
            yield f"{unique_id} ({node['original_file_path']}): no description"
        for name, column in node.get("columns", {}).items():
            if _blank(column.get("description")):
                yield f"{unique_id}: column {name} has no description"
    seen_source_names = set()
    for unique_id, source in sorted(manifest["sources"].items()):
        if source["package_name"] != project:
            continue
        if source["source_name"] not in seen_source_names:
            seen_source_names.add(source["source_name"])
            if _blank(source.get("source_description")):
                yield f"source {source['source_name']} ({source['original_file_path']}): no description"
        if _blank(source.get("description")):
            yield f"{unique_id}: no description"
        for name, column in source.get("columns", {}).items():
            if _blank(column.get("description")):
                yield f"{unique_id}: column {name} has no description"
    for unique_id, exposure in sorted(manifest.get("exposures", {}).items()):
        if exposure["package_name"] == project and _blank(exposure.get("description")):
            yield f"{unique_id}: no description"


def _lineage(manifest: dict, start: str) -> set[str]:
    """`start`, everything upstream of it and everything downstream of it (models, snapshots, seeds,
    sources; not tests), by the manifest's depends_on."""
    parents: dict[str, list[str]] = {}
    children: dict[str, list[str]] = {}
    for unique_id, node in manifest["nodes"].items():
        if node["resource_type"] == "test":
            continue
        for parent in node.get("depends_on", {}).get("nodes", []):
            parents.setdefault(unique_id, []).append(parent)
            children.setdefault(parent, []).append(unique_id)
    found = {start}
    for edges in (parents, children):
        stack = [start]
        while stack:
            for other in edges.get(stack.pop(), []):
                if other not in found:
                    found.add(other)
                    stack.append(other)
    return found


def evolved_columns(manifest: dict, added: Iterable[AddedColumn]) -> dict[str, dict[str, AddedColumn]]:
    """{unique_id: {lower-case column: the log's entry}}: where each added column is expected to show.
    The table the log names is the node whose relation (schema and identifier, case-insensitively)
    it is; the column is then excused in that node, its upstream and its downstream. The earliest
    entry wins when several tables of one lineage added the same name."""
    by_relation: dict[tuple[str, ...], list[str]] = {}
    for unique_id, node in {**manifest["nodes"], **manifest["sources"]}.items():
        if node.get("relation_name"):
            key = tuple(part.lower() for part in relation_parts(node["relation_name"])[-2:])
            by_relation.setdefault(key, []).append(unique_id)
    excused: dict[str, dict[str, AddedColumn]] = {}
    for column in sorted(added, key=lambda c: c.applied_at):
        key = tuple(part.lower() for part in relation_parts(column.table)[-2:])
        for start in by_relation.get(key, []):
            for unique_id in _lineage(manifest, start):
                excused.setdefault(unique_id, {}).setdefault(column.column.lower(), column)
    return excused


def _yml_path(node: dict) -> str:
    """The yml file that describes a node: a model's patch, a source's or yml snapshot's own file."""
    patch = node.get("patch_path")
    if patch:
        return patch.split("://", 1)[-1]
    path = node.get("original_file_path") or "?"
    return path if path.endswith((".yml", ".yaml")) else f"a yml file beside {path}"


def catalog_findings(
    manifest: dict, catalog: dict, project: str, added: Iterable[AddedColumn] = ()
) -> tuple[list[str], list[str]]:
    """(gaps, warnings) for the columns a built relation has that its yml does not list: a gap, unless
    schema evolution added that column (`evolved_columns`), which is a warning."""
    declared = {**manifest["nodes"], **manifest["sources"]}
    excused = evolved_columns(manifest, added)
    gaps, warnings = [], []
    for unique_id, entry in sorted({**catalog.get("nodes", {}), **catalog.get("sources", {})}.items()):
        node = declared.get(unique_id)
        if node is None or node["package_name"] != project:
            continue
        if node["resource_type"] not in DOCUMENTED_NODES | {"source"}:
            continue
        documented = {name.lower() for name in node.get("columns", {})}
        for name in entry.get("columns", {}):
            if name.lower() in documented:
                continue
            evolved = excused.get(unique_id, {}).get(name.lower())
            if evolved is None:
                gaps.append(f"{unique_id}: column {name} (in the warehouse) is not in the yml")
            else:
                warnings.append(
                    f"WARNING {unique_id}: column {name} is not in the yml: added by schema evolution on "
                    f"{evolved.applied_at[:10]}, {evolved.where}: describe it in {_yml_path(node)}"
                )
    return gaps, warnings


def read_added_columns(target: Path) -> list[AddedColumn]:
    """The columns schema evolution added, as the last `python -m python_hooks docs` saved them."""
    path = target / EVOLUTION_FILE
    if not path.is_file():
        return []
    return [AddedColumn(**entry) for entry in json.loads(path.read_text())["added_columns"]]


def check(target: Path, added: Iterable[AddedColumn] | None = None) -> Coverage:
    """The coverage of the artifacts in `target`; `added` defaults to <target>/cdc_schema_evolution.json."""
    manifest = json.loads((target / "manifest.json").read_text())
    project = manifest["metadata"].get("project_name") or "cdc_lakehouse"
    coverage = Coverage(gaps=list(manifest_gaps(manifest, project)))
    catalog_path = target / "catalog.json"
    if catalog_path.exists():
        catalog = json.loads(catalog_path.read_text())
        added = read_added_columns(target) if added is None else list(added)
        gaps, warnings = catalog_findings(manifest, catalog, project, added)
        coverage.gaps += gaps
        coverage.warnings += warnings
    return coverage


def report(coverage: Coverage, target: Path) -> list[str]:
    """The check's lines: each gap, each warning, then the count."""
    return [
        *coverage.gaps,
        *coverage.warnings,
        f"docs coverage: {len(coverage.gaps)} gap(s), {len(coverage.warnings)} warning(s) in {target}/manifest.json",
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """scripts/check_docs_coverage.py [TARGET_DIR]: exit 1 on a gap, 0 with warnings only."""
    args = sys.argv[1:] if argv is None else list(argv)
    target = Path(args[0] if args else "target")
    if not (target / "manifest.json").exists():
        print(f"{target}/manifest.json not found: run `dbt parse` or `make docs` first", file=sys.stderr)
        return 2
    coverage = check(target)
    *lines, summary = report(coverage, target)
    for line in lines:
        print(line)
    print(summary, file=sys.stderr)
    return 0 if coverage.ok else 1


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
    from python_hooks.schema_plan import quote_ident

    entries = {**catalog.get("nodes", {}), **catalog.get("sources", {})}
    counts = []
    for unique_id, schema, name in catalog_tables(catalog, manifest, project):
        relation = f"{quote_ident(schema)}.{quote_ident(name)}"
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
    from python_hooks.schema_plan import quote_ident

    if not warehouse.table_exists(warehouse.meta_schema, "schema_evolution_log"):
        return None
    rows = warehouse.query(
        f"select table_name, column_name, cast(min(applied_at) as string) as applied_at"
        f" from {quote_ident(warehouse.meta_schema)}.schema_evolution_log where action = 'add_column'"
        f" group by table_name, column_name order by applied_at, table_name, column_name"
    )
    return [AddedColumn(table, column, applied_at or "") for table, column, applied_at in rows]


def drop_temporary_views(warehouse) -> list[str]:
    """Drops the session's temporary views (what an earlier command of this process left, e.g. a
    pipeline run's batch views, macros/cdc/current_state.sql): `show table extended in <schema> like
    '*'`, which dbt-spark's catalog runs, lists them in every schema with an empty namespace, which dbt
    reads as schema None and fails on ('NoneType' object has no attribute 'lower'). A process that
    only builds the docs has none."""
    from python_hooks.schema_plan import quote_ident

    names = sorted(row[1] for row in warehouse.query("show views") if row[2])
    for name in names:
        warehouse.execute(f"drop view if exists {quote_ident(name)}")
    return names


def target_path(dbt_args: Sequence[str]) -> Path:
    """Where dbt writes its artifacts: --target-path, DBT_TARGET_PATH or the project's `target`,
    relative to the project directory (dbt's project_target_path)."""
    from python_hooks import env
    from python_hooks.warehouse import dbt_option

    project_dir = Path(dbt_option(dbt_args, "--project-dir") or env.PROJECT_ROOT)
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
    from python_hooks.warehouse import Warehouse

    if runner is None:
        from dbt.cli.main import dbtRunner

        runner = dbtRunner()
    dbt_args = list(dbt_args)
    if not runner.invoke(["parse", "--quiet", *dbt_args]).success:
        echo("docs: dbt parse failed: see the errors above")
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
