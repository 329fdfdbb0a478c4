"""The live capture's settings, from CDC_LIVE_* variables (docs/live.md), and its tables.

    CDC_LIVE_DIR          its folder (data/live): postgres/ (the source database), capture/ (Debezium's
                          offsets, the sink's state, the PID file), logs/
    CDC_LIVE_PG_PORT      the source database's port on 127.0.0.1 (15433)
    CDC_LIVE_FLUSH_SIZE   records per Parquet file, the S3 sink's `flush.size` (1000)
    CDC_LIVE_ROTATE_MS    a file is closed this long after its first record arrived, also when no other
                          record comes (5000; the S3 sink's `rotate.interval.ms` with the wall clock)
    CDC_LANDING_ROOT      where the files land: debezium/topics/<topic>/partition=<p>/

    CDC_LIVE_CONFIG       a YAML file naming another source (below); unset: the demo's `shop` tables on the
                          private server
    CDC_LIVE_PG_PASSWORD  the password of the connection's user (never in the file)

TABLES is the demo's list of tables (schema.sql): their key, how their topic is written (flattened by
ExtractNewRecordState or the full envelope) and into how many Kafka partitions. CDC_LIVE_CONFIG points the
capture, `live status` and `live compare` at any PostgreSQL instead (CONFIG_EXAMPLE); `live pg-up`,
`live workload` and `live demo` are the demo's and need no file.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import yaml

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
# Debezium's `unavailable.value.placeholder` (its default): a TOASTed value an update left alone.
PLACEHOLDER = "__debezium_unavailable_value"
CONFIG_EXAMPLE = """\
# CDC_LIVE_CONFIG: the live capture pointed at a PostgreSQL of one's own (python_hooks/live/config.py)
connection:            # leave out `host` for the private server of `live pg-up` (127.0.0.1:$CDC_LIVE_PG_PORT)
  host: db.internal    # an external server: wal_level=logical, a user with REPLICATION (password:
  port: 5432           # CDC_LIVE_PG_PASSWORD) that may create the publication for the tables
  database: app
  user: debezium
topic_prefix: app      # Debezium's topic.prefix: a table's topic is <prefix>.<schema>.<table>
slot: cdc_live         # the replication slot and the publication the capture creates
publication: cdc_live
placeholder: __debezium_unavailable_value   # Debezium's unavailable.value.placeholder
tables:
  - name: sales.orders # schema.table
    key: [order_id]
    shape: flattened   # flattened (ExtractNewRecordState: truncates not seen) or envelope
    partitions: 2      # the topic's Kafka partitions (the S3 sink's partition=<p> folders)
"""

Shape = Literal["flattened", "envelope"]


@dataclass(frozen=True)
class LiveTable:
    """A captured table: its key columns, the shape of its topic's files, its topic's partition count."""

    name: str
    key: tuple[str, ...]
    shape: Shape
    partitions: int = 1
    schema: str = SCHEMA
    prefix: str = TOPIC_PREFIX  # the capture's topic.prefix

    @property
    def topic(self) -> str:
        return f"{self.prefix}.{self.schema}.{self.name}"

    @property
    def qualified(self) -> str:
        """schema.table, as Debezium's table.include.list names it."""
        return f"{self.schema}.{self.name}"


TABLES: tuple[LiveTable, ...] = (
    LiveTable("customer", ("customer_id",), "flattened", partitions=2),
    LiveTable("order_line", ("order_id", "line_no"), "envelope"),
    LiveTable("document", ("document_id",), "flattened"),
)


@dataclass(frozen=True)
class LiveConfig:
    """Where the capture works and lands, and its source: by default the demo's tables on the private
    server; from CDC_LIVE_CONFIG any PostgreSQL's (`host` set: an external server, not started here)."""

    folder: Path
    pg_port: int
    landing_root: Path
    flush_size: int
    rotate_ms: int
    tables: tuple[LiveTable, ...] = TABLES
    host: str | None = None  # None: the private server on 127.0.0.1:pg_port
    database: str = DATABASE
    user: str = USER
    topic_prefix: str = TOPIC_PREFIX
    slot: str = SLOT
    publication: str = PUBLICATION
    placeholder: str = PLACEHOLDER
    password: str | None = field(default=None, repr=False)  # CDC_LIVE_PG_PASSWORD only

    @property
    def external(self) -> bool:
        """A server of one's own: `live pg-up`/`pg-down` do not touch it."""
        return self.host is not None

    @property
    def pg_host(self) -> str:
        return self.host or HOST

    @property
    def demo(self) -> bool:
        """The demo's tables (schema.sql), which `live workload` changes."""
        return self.tables == TABLES and not self.external and self.database == DATABASE

    @property
    def heartbeat_topic(self) -> str:
        return f"__debezium-heartbeat.{self.topic_prefix}"

    @property
    def message_topic(self) -> str:
        return f"{self.topic_prefix}.message"

    def table_by_topic(self, topic: str) -> LiveTable | None:
        return next((table for table in self.tables if table.topic == topic), None)

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
            folder_variable="CDC_LIVE_DIR",
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

    def conninfo(self, database: str | None = None) -> str:
        """libpq's connection string: the configured user over TCP (on the private server the superuser,
        trusted on 127.0.0.1: no password; elsewhere CDC_LIVE_PG_PASSWORD, through libpq's PGPASSWORD)."""
        return f"host={self.pg_host} port={self.pg_port} dbname={database or self.database} user={self.user}"

    def connect_kwargs(self) -> dict[str, str]:
        """The password for psycopg.connect, when there is one."""
        return {"password": self.password} if self.password else {}


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
    config = LiveConfig(
        folder=folder,
        pg_port=_positive(environ, "CDC_LIVE_PG_PORT", DEFAULT_PORT),
        landing_root=Path(environ["CDC_LANDING_ROOT"]),
        flush_size=_positive(environ, "CDC_LIVE_FLUSH_SIZE", 1000),
        rotate_ms=_positive(environ, "CDC_LIVE_ROTATE_MS", 5000),
        password=environ.get("CDC_LIVE_PG_PASSWORD") or None,
    )
    if environ.get("CDC_LIVE_CONFIG"):
        config = with_file(config, Path(environ["CDC_LIVE_CONFIG"]))
    return config


class ConfigError(SystemExit):
    """A CDC_LIVE_CONFIG file that cannot be used: one line naming the file and the entry."""


def _name(where: str, value: object) -> str:
    """A PostgreSQL or Kafka name from the file: letters, digits, `_`, `-`, `$` (quoted where it enters SQL)."""
    text = str(value) if value is not None else ""
    if not text or any(c in text for c in "\\\"'.;") or any(ord(c) < 32 for c in text):
        raise ConfigError(f"{where}: {value!r} is not a name (no quotes, dots, semicolons or control characters)")
    return text


def with_file(config: LiveConfig, path: Path) -> LiveConfig:
    """`config` with the source that the YAML file `path` names (CONFIG_EXAMPLE)."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as error:
        raise ConfigError(f"CDC_LIVE_CONFIG={path}: {str(error).splitlines()[0]}") from None
    if not isinstance(data, dict) or not isinstance(data.get("tables"), list) or not data["tables"]:
        raise ConfigError(f"CDC_LIVE_CONFIG={path}: no `tables:` list (see python_hooks/live/config.py)")
    unknown = sorted(set(data) - {"connection", "topic_prefix", "slot", "publication", "placeholder", "tables"})
    if unknown:
        raise ConfigError(f"CDC_LIVE_CONFIG={path}: unknown setting(s) {', '.join(unknown)}")
    connection = data.get("connection") or {}
    if not isinstance(connection, dict) or set(connection) - {"host", "port", "database", "user"}:
        raise ConfigError(
            f"CDC_LIVE_CONFIG={path}: `connection` takes host, port, database, user (password: CDC_LIVE_PG_PASSWORD)"
        )
    prefix = _name(f"{path}: topic_prefix", data.get("topic_prefix", TOPIC_PREFIX))
    tables = []
    for number, entry in enumerate(data["tables"], start=1):
        where = f"{path}: table {number}"
        if not isinstance(entry, dict) or set(entry) - {"name", "key", "shape", "partitions"}:
            raise ConfigError(f"{where}: give name (schema.table), key, shape, partitions")
        parts = str(entry.get("name", "")).split(".")
        if len(parts) != 2:
            raise ConfigError(f"{where}: name {entry.get('name')!r} is not schema.table")
        keys = entry.get("key")
        keys = [keys] if isinstance(keys, str) else keys
        if not isinstance(keys, list) or not keys:
            raise ConfigError(f"{where} ({entry['name']}): no key columns (key: [col, ...])")
        shape = entry.get("shape", "flattened")
        if shape not in ("flattened", "envelope"):
            raise ConfigError(f"{where} ({entry['name']}): shape {shape!r} is neither flattened nor envelope")
        partitions = entry.get("partitions", 1)
        if not isinstance(partitions, int) or partitions <= 0:
            raise ConfigError(f"{where} ({entry['name']}): partitions {partitions!r} is not a positive whole number")
        tables.append(
            LiveTable(
                _name(where, parts[1]),
                tuple(_name(f"{where} key", key) for key in keys),
                shape,
                partitions,
                schema=_name(where, parts[0]),
                prefix=prefix,
            )
        )
    topics = [table.topic for table in tables]
    if len(set(topics)) != len(topics):
        raise ConfigError(f"CDC_LIVE_CONFIG={path}: a table is named twice")
    port = connection.get("port", config.pg_port)
    if not isinstance(port, int) or port <= 0:
        raise ConfigError(f"CDC_LIVE_CONFIG={path}: connection port {port!r} is not a port number")
    return dataclasses.replace(
        config,
        tables=tuple(tables),
        host=str(connection["host"]) if connection.get("host") else None,
        pg_port=port,
        database=_name(f"{path}: connection database", connection.get("database", DATABASE)),
        user=_name(f"{path}: connection user", connection.get("user", USER)),
        topic_prefix=prefix,
        slot=_name(f"{path}: slot", data.get("slot", SLOT)),
        publication=_name(f"{path}: publication", data.get("publication", PUBLICATION)),
        placeholder=str(data.get("placeholder", PLACEHOLDER)),
    )
