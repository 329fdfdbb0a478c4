"""The raw files waiting per current-state table: listed in its landing folder, not in its ledger.
Read from the warehouse (the folder's binaryFile listing table, which staging keeps, and the
ledger), so that no raw file is opened."""

from __future__ import annotations

from collections.abc import Sequence

from python_hooks.landing.files import probe_name
from python_hooks.project.meta import FILE_LEDGER
from python_hooks.project.sql import quoted_relation, sql_string
from python_hooks.project.tables import CdcTable
from python_hooks.project.warehouse import Warehouse

# The listing rule of landing/files.py in SQL over a binaryFile listing's `path`, as
# macros/cdc/landing.sql (cdc_landing_listing_sql) writes it: Parquet files, no hidden file.
RAW_PATH_FILTER_SQL = "path like '%.parquet' and not regexp(path, '/[._][^/]*$')"


def table_probe(table: CdcTable) -> str:
    return probe_name(table.source_name, table.table_name, table.landing)


def pending_files(warehouse: Warehouse, tables: Sequence[CdcTable]) -> dict[str, int]:
    """model -> how many raw files its folder lists that its ledger does not: the files waiting.
    One query over the folders' listings and the ledger; no raw file is read. Only models whose
    table and listing table exist."""
    meta = warehouse.meta_schema
    known = [
        t
        for t in tables
        if warehouse.table_exists(t.schema, t.identifier) and warehouse.table_exists(meta, table_probe(t))
    ]
    if not known or not warehouse.table_exists(meta, FILE_LEDGER):
        return {}
    parts = []
    for table in known:
        probe = quoted_relation(meta, table_probe(table))
        warehouse.execute(f"refresh table {probe}")
        parts.append(
            f"select {sql_string(table.model)} as model, count(*) as pending"
            f" from (select regexp_extract(path, '[^/]*$', 0) as file_name from {probe}"
            f" where {RAW_PATH_FILTER_SQL}) as listing"
            f" left anti join (select file_name from {quoted_relation(meta, FILE_LEDGER)}"
            f" where model_name = {sql_string(table.identifier)}) as ledger"
            f" on listing.file_name = ledger.file_name"
        )
    return {model: int(pending) for model, pending in warehouse.query(" union all ".join(parts))}


def idle_models(warehouse: Warehouse, tables: Sequence[CdcTable]) -> set[str]:
    """The current-state models (and their staging models) with nothing to apply: the table exists
    and every raw file its folder lists is in its ledger (`pending_files`). A model whose listing
    table does not exist yet is not idle."""
    pending = pending_files(warehouse, tables)
    idle = set()
    for table in tables:
        if pending.get(table.model, 1) == 0:
            idle.update({table.model, table.staging_model})
    return idle
