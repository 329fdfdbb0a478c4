"""The cluster target of a test run, read through its Thrift Server (the `cluster` fixture brings it up)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path


class Cluster:
    """A cluster of this test run (`python -m python_hooks cluster up` on free ports, in its own
    folder), read through its Thrift Server with PyHive: not through the code under test."""

    def __init__(self, root: Path, environ: dict[str, str], up_seconds: float) -> None:
        self.root = root
        self.environ = environ
        self.up_seconds = up_seconds
        self.port = int(environ["CDC_THRIFT_PORT"])

    def query(self, sql: str) -> list[tuple]:
        """Rows with Python values: timestamps, dates and decimals that arrive as strings, parsed."""
        import datetime as dt
        from decimal import Decimal

        from pyhive import hive

        parse = {
            "TIMESTAMP_TYPE": dt.datetime.fromisoformat,
            "DATE_TYPE": dt.date.fromisoformat,
            "DECIMAL_TYPE": Decimal,
        }
        connection = hive.connect(host="127.0.0.1", port=self.port, username="pytest")
        try:
            cursor = connection.cursor()
            cursor.execute(sql)
            kinds = [parse.get(column[1]) for column in cursor.description]
            return [
                tuple(kind(v) if kind and isinstance(v, str) else v for kind, v in zip(kinds, row, strict=True))
                for row in cursor.fetchall()
            ]
        finally:
            connection.close()

    def execute(self, sql: str) -> None:
        """A statement whose result is not read (DDL: PyHive cannot fetch its result on Spark 3.5)."""
        from pyhive import hive

        connection = hive.connect(host="127.0.0.1", port=self.port, username="pytest")
        try:
            connection.cursor().execute(sql)
        finally:
            connection.close()

    def table_rows(self, relation: str, key: Sequence[str], columns: Iterable[str]) -> dict[tuple, dict]:
        """The whole table as key tuple -> {column: value}, like helpers.tables.table_rows()."""
        columns = list(columns)
        quoted = ", ".join("`" + c.replace("`", "``") + "`" for c in columns)
        result = {}
        for row in self.query(f"select {quoted} from {relation}"):
            record = dict(zip(columns, row, strict=True))
            k = tuple(record[c] for c in key)
            assert k not in result, f"{relation}: duplicate key {k}"
            result[k] = record
        return result

    def locks(self) -> int:
        from python_hooks import cluster as manager

        return manager.lock_count(manager.config_from_env(dict(self.environ)))


def free_ports(count: int) -> list[int]:
    import socket

    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()
