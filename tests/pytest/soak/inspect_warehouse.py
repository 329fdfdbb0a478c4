"""What the soak's checks read from the warehouse at the end of the day, in a process of its own (it opens
the embedded Spark session, as every command does), pickled for the checks (soak/checks.py):

    python -m soak.inspect_warehouse OUT.pickle     (the soak's environment: commands.environment)

Per Iceberg table of the soak's current-state and meta schemas: its columns and rows (every row of the
current-state tables and of the batch log, ledger, erasure and schema-evolution logs), its snapshots, its
branches, its folder and every data and delete file its retained snapshots refer to.
"""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

from python_hooks.project.iceberg import is_iceberg_table
from python_hooks.project.meta import meta_schema
from python_hooks.project.sql import quote_ident
from python_hooks.project.warehouse import Warehouse

ROWS_OF_META = ("cdc_batch_log", "cdc_file_ledger", "erasure_log", "schema_evolution_log")


def _location(warehouse: Warehouse, relation: str) -> str:
    for name, value, *_ in warehouse.query(f"describe table extended {relation}"):
        if (name or "").strip() == "Location":
            return str(value)
    return ""


def _files(warehouse: Warehouse, relation: str) -> list[str]:
    found = []
    for metadata in ("all_data_files", "all_delete_files"):
        try:
            found += [row[0] for row in warehouse.query(f"select distinct file_path from {relation}.{metadata}")]
        except Exception:  # noqa: BLE001 - an Iceberg without all_delete_files: data files alone
            continue
    return found


def inspect(warehouse: Warehouse) -> dict:
    tables = {}
    current = f"{warehouse.schema}_current"
    for schema in (current, meta_schema(warehouse.schema)):
        for identifier in sorted(warehouse.tables(schema)):
            if not is_iceberg_table(warehouse, schema, identifier):
                continue  # the landing folders' listing tables
            relation = f"{quote_ident(schema)}.{quote_ident(identifier)}"
            columns = [name for name, _ in warehouse.columns(schema, identifier) or []]
            with_rows = schema == current or identifier in ROWS_OF_META
            tables[f"{schema}.{identifier}"] = {
                "kind": "current_state" if schema == current else "meta",
                "columns": columns,
                "rows": [tuple(row) for row in warehouse.query(f"select * from {relation}")] if with_rows else None,
                "snapshots": warehouse.query(f"select snapshot_id, committed_at from {relation}.snapshots"),
                "branches": [r[0] for r in warehouse.query(f"select name from {relation}.refs where type = 'BRANCH'")],
                "location": _location(warehouse, relation),
                "files": _files(warehouse, relation),
            }
    return {"schema": warehouse.schema, "tables": tables}


def main() -> int:
    out = Path(sys.argv[1])
    with Warehouse.open([]) as warehouse:
        state = inspect(warehouse)
    with out.open("wb") as handle:
        pickle.dump(state, handle)
    print(f"inspected {len(state['tables'])} tables into {out}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
