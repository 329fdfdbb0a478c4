"""Every source, model, snapshot, seed, exposure and column of the project has a description.

    python scripts/check_docs_coverage.py [TARGET_DIR]      (default: target)

Reads dbt's artifacts (`dbt parse` or `dbt docs generate` writes them): `manifest.json` for what the
yml files declare, and `catalog.json` when it lists relations (a warehouse that was built) for the
columns the tables really have, so that a column missing from the yml is found too. Doc blocks
count: their text is in the manifest. Exit status 1 and one line per gap.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

DOCUMENTED_NODES = {"model", "snapshot", "seed"}


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


def catalog_gaps(manifest: dict, catalog: dict, project: str) -> Iterator[str]:
    """Columns a built relation has that its yml does not list (so nothing describes them)."""
    declared = {**manifest["nodes"], **manifest["sources"]}
    for unique_id, entry in sorted({**catalog.get("nodes", {}), **catalog.get("sources", {})}.items()):
        node = declared.get(unique_id)
        if node is None or node["package_name"] != project:
            continue
        if node["resource_type"] not in DOCUMENTED_NODES | {"source"}:
            continue
        documented = {name.lower() for name in node.get("columns", {})}
        for name in entry.get("columns", {}):
            if name.lower() not in documented:
                yield f"{unique_id}: column {name} (in the warehouse) is not in the yml"


def check(target: Path) -> list[str]:
    manifest = json.loads((target / "manifest.json").read_text())
    project = manifest["metadata"].get("project_name") or "cdc_lakehouse"
    gaps = list(manifest_gaps(manifest, project))
    catalog_path = target / "catalog.json"
    if catalog_path.exists():
        gaps += catalog_gaps(manifest, json.loads(catalog_path.read_text()), project)
    return gaps


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    target = Path(args[0] if args else "target")
    if not (target / "manifest.json").exists():
        print(f"{target}/manifest.json not found: run `dbt parse` or `make docs` first", file=sys.stderr)
        return 2
    gaps = check(target)
    for gap in gaps:
        print(gap)
    print(f"docs coverage: {len(gaps)} gap(s) in {target}/manifest.json", file=sys.stderr)
    return 1 if gaps else 0


if __name__ == "__main__":
    sys.exit(main())
