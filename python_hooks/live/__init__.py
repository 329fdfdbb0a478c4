"""A live source on this machine (`python -m python_hooks live ...`, `make live-up|live-workload|live-down`):
a private PostgreSQL 15 with logical decoding, captured by Debezium's embedded engine into the landing zone
as the Kafka Connect S3 sink writes Parquet, and a workload to change it.

    config    settings from CDC_LIVE_* variables; the tables, their keys, topic shapes and partitions
    source    the source database: up, down, its replication slot (schema.sql: its tables)
    sink      the S3 sink's files: Connect schema -> Parquet, Kafka's partitioner, rolling, atomic writes
    capture   the Debezium engine: run, start (detached), stop, drain, status; at-least-once delivery
    workload  transactions that meet every case: several changes of a key in one transaction, a TRUNCATE,
              columns added and widened mid-stream, TOASTed values left unchanged

What real Debezium output looks like next to the project's assumptions: docs/DEBEZIUM_REAL_OUTPUT.md.
"""

from python_hooks.live import capture, source, workload
from python_hooks.live.config import TABLES, LiveConfig, LiveTable, config_from_env

__all__ = ["TABLES", "LiveConfig", "LiveTable", "capture", "config_from_env", "source", "workload"]
