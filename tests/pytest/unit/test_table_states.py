"""project/iceberg.py: table_states reads many tables' states in one query, as cdc_table_state reads one."""

from __future__ import annotations

from python_hooks.project.iceberg import table_states


class OneQuery:
    """Answers the one query with given rows, and keeps its text."""

    def __init__(self, rows: list[tuple]) -> None:
        self.rows = rows
        self.sql: list[str] = []

    def query(self, sql: str) -> list[tuple]:
        self.sql.append(sql)
        return self.rows


def test_states_of_several_tables_come_from_one_query() -> None:
    warehouse = OneQuery(
        [
            ("a", "main", "BRANCH", 11, "2048", "20", "3", "1"),
            ("a", "cdc_batch_1_x", "BRANCH", 10, "1024", "17", "0", "0"),
            ("a", "audit", "TAG", 9, None, None, None, None),
            ("b", "main", "BRANCH", 7, "512", "5", None, None),
        ]
    )
    states = table_states(warehouse, {"a": "`s`.`a`", "b": "`s`.`b`", "c": "`s`.`c`"})
    assert len(warehouse.sql) == 1 and warehouse.sql[0].count(" union all ") == 2
    assert states["a"] == {
        "snapshot": 11,
        "branches": ["cdc_batch_1_x"],
        "bytes": 2048,
        "layout": {"data_rows": 20, "deleted_rows": 3, "delete_files": 1},
    }
    assert states["b"] == {"snapshot": 7, "branches": [], "bytes": 512, "layout": None}
    assert states["c"] == {"snapshot": None, "branches": [], "bytes": 0, "layout": None}  # no snapshot yet


def test_no_table_no_query() -> None:
    warehouse = OneQuery([])
    assert table_states(warehouse, {}) == {} and not warehouse.sql
