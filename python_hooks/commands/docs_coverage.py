"""The docs coverage check: every source, model, snapshot, seed, exposure and column of the project
has a description (the rules: scripts/check_docs_coverage.py's docstring; `make docs` runs it after
building the site, python_hooks/commands/docs.py). Pure: reads dbt's artifacts, never the warehouse."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from python_hooks.project.sql import relation_parts

DOCUMENTED_NODES = {"model", "snapshot", "seed"}
EVOLUTION_FILE = "cdc_schema_evolution.json"


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
