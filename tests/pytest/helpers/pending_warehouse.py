"""A warehouse with no Spark behind it, answering what `python_hooks.landing.pending` asks: which tables exist
(`listed`: the schemas whose listing it asked, as the schema hook reads them when a file waits) and the ledger's
rows for the tables a query names (`queries`: every query it was sent)."""

from __future__ import annotations


class PendingWarehouse:
    meta_schema = "lake_cdc_meta"

    def __init__(self, tables: set[tuple[str, str]], ledger: list[tuple[str, str]]) -> None:
        self._tables, self._ledger, self.queries, self.listed = tables, ledger, [], []

    def table_exists(self, schema: str, identifier: str) -> bool:
        return (schema, identifier) in self._tables

    def listed_columns(self, schema: str) -> dict:
        self.listed.append(schema)
        return {}

    def query(self, sql: str) -> list[tuple]:
        self.queries.append(sql)
        return [row for row in self._ledger if f"'{row[0]}'" in sql.split(" in (", 1)[1]]
