"""The live capture's settings, from CDC_LIVE_* variables (docs/live.md), and its tables.

    CDC_LIVE_DIR          its folder (data/live): postgres/ (the source database), capture/ (Debezium's
                          offsets, the sink's state, the PID file), logs/
    CDC_LIVE_PG_PORT      the source database's port on 127.0.0.1 (15433)
    CDC_LIVE_FLUSH_SIZE   records per Parquet file, the S3 sink's `flush.size` (1000)
    CDC_LIVE_ROTATE_MS    a file is closed this long after its first record arrived, also when no other
                          record comes (5000; the S3 sink's `rotate.interval.ms` with the wall clock)
    CDC_LANDING_ROOT      where the files land: debezium/topics/<topic>/partition=<p>/

TABLES is the one list of the source's tables: their key, how their topic is written (flattened by
ExtractNewRecordState or the full envelope) and into how many Kafka partitions.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from python_hooks.project import env
from python_hooks.project.postgres import HOST, PrivatePostgres

DEFAULT_PORT = 15433  # the shared target's metastore has 15432
DATABASE = "shopdb"  # its schema `shop` (SCHEMA) names the topics, not the database
USER = "postgres"
SCHEMA = "shop"
# Debezium's `topic.prefix` (the Kafka Connect "server name"): a table's topic is <prefix>.<schema>.<table>.
TOPIC_PREFIX = "pglive"
SLOT = "cdc_live"
PUBLICATION = "cdc_live"
# Logical decoding messages with this prefix are the capture's drain markers (`live drain`).
MARKER_PREFIX = "cdc-live-marker"
# The landing folder of the topics, under CDC_LANDING_ROOT (the S3 sink's `topics.dir`).
TOPICS_FOLDER = Path("debezium") / "topics"

Shape = Literal["flattened", "envelope"]


@dataclass(frozen=True)
class LiveTable:
    """A captured table: its key columns, the shape of its topic's files, its topic's partition count."""

    name: str
    key: tuple[str, ...]
    shape: Shape
    partitions: int = 1

    @property
    def topic(self) -> str:
        return f"{TOPIC_PREFIX}.{SCHEMA}.{self.name}"


TABLES: tuple[LiveTable, ...] = (
    LiveTable("customer", ("customer_id",), "flattened", partitions=2),
    LiveTable("order_line", ("order_id", "line_no"), "envelope"),
    LiveTable("document", ("document_id",), "flattened"),
)
TABLES_BY_TOPIC: Mapping[str, LiveTable] = {table.topic: table for table in TABLES}


@dataclass(frozen=True)
class LiveConfig:
    folder: Path
    pg_port: int
    landing_root: Path
    flush_size: int
    rotate_ms: int

    @property
    def postgres(self) -> PrivatePostgres:
        """The source database's server (python_hooks/project/postgres.py starts and stops it)."""
        return PrivatePostgres(
            name="live postgres",
            pgdata=self.folder / "postgres",
            port=self.pg_port,
            socket_dir=self.folder / "run",
            log_file=self.log_file("postgres"),
            pid_file=self.folder / "run" / "postgres.pid",
            port_variable="CDC_LIVE_PG_PORT",
            # Logical decoding for Debezium's pgoutput slot; small, as on a laptop beside Spark.
            settings={
                "wal_level": "logical",
                "max_wal_senders": "4",
                "max_replication_slots": "4",
                "shared_buffers": "32MB",
                "max_connections": "20",
            },
        )

    @property
    def capture_dir(self) -> Path:
        return self.folder / "capture"

    @property
    def offsets_file(self) -> Path:
        """Debezium's FileOffsetBackingStore: the source position the capture resumes from."""
        return self.capture_dir / "offsets.dat"

    @property
    def state_file(self) -> Path:
        """The sink's state: written files, records buffered, the last drain marker landed (capture.py)."""
        return self.capture_dir / "state.json"

    @property
    def pid_file(self) -> Path:
        return self.capture_dir / "capture.pid"

    @property
    def topics_root(self) -> Path:
        return self.landing_root / TOPICS_FOLDER

    def topic_dir(self, topic: str) -> Path:
        return self.topics_root / topic

    def log_file(self, part: str) -> Path:
        return self.folder / "logs" / f"{part}.log"

    def conninfo(self, database: str = DATABASE) -> str:
        """libpq's connection string for the superuser over TCP (trust on 127.0.0.1: no password)."""
        return f"host={HOST} port={self.pg_port} dbname={database} user={USER}"


def _positive(environ: Mapping[str, str], name: str, default: int) -> int:
    value = environ.get(name) or str(default)
    if not value.isdigit() or int(value) <= 0:
        raise SystemExit(f"{name}={value!r} is not a positive whole number")
    return int(value)


def config_from_env(environ: os._Environ[str] | dict[str, str] = os.environ) -> LiveConfig:
    if "://" in environ.get("CDC_LANDING_ROOT", ""):
        raise SystemExit(
            f"CDC_LANDING_ROOT={environ['CDC_LANDING_ROOT']}: the live capture writes to a local folder only"
        )
    env.apply_defaults(environ)
    folder = Path(environ.get("CDC_LIVE_DIR") or env.PROJECT_ROOT / "data" / "live").resolve()
    return LiveConfig(
        folder=folder,
        pg_port=_positive(environ, "CDC_LIVE_PG_PORT", DEFAULT_PORT),
        landing_root=Path(environ["CDC_LANDING_ROOT"]),
        flush_size=_positive(environ, "CDC_LIVE_FLUSH_SIZE", 1000),
        rotate_ms=_positive(environ, "CDC_LIVE_ROTATE_MS", 5000),
    )
