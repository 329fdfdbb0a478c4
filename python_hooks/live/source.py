"""The live source database: a private PostgreSQL 15 with logical decoding (wal_level=logical) in
$CDC_LIVE_DIR/postgres, on 127.0.0.1:$CDC_LIVE_PG_PORT, holding the database `shopdb` and its schema
`shop` (schema.sql).

`up` starts it and creates the database and tables (each step safe to run again); `down` stops it by
PID and leaves its data; `slot_lag` tells what the capture's replication slot holds back.
"""

from __future__ import annotations

import logging
from pathlib import Path

from python_hooks.live.config import DATABASE, SLOT, TABLES, LiveConfig
from python_hooks.project import postgres

log = logging.getLogger(__name__)

SCHEMA_SQL = Path(__file__).with_name("schema.sql")


def up(config: LiveConfig) -> None:
    """Start the server unless it runs, create the database and its tables. Harmless twice."""
    postgres.start(config.postgres)
    if not postgres.psql(config.postgres, f"select 1 from pg_database where datname = '{DATABASE}'"):
        postgres.psql(config.postgres, f"create database {DATABASE}")
        log.info("live postgres: database %s created", DATABASE)
    postgres.psql(config.postgres, SCHEMA_SQL.read_text(), database=DATABASE)
    log.info(
        "live postgres: database %s ready at %s (tables %s); log %s",
        DATABASE,
        config.conninfo(),
        ", ".join(table.name for table in TABLES),
        config.postgres.log_file,
    )


def down(config: LiveConfig) -> None:
    """Stop the server by PID; its data stays for the next `up`."""
    postgres.stop(config.postgres)


def running(config: LiveConfig) -> bool:
    return postgres.running_pid(config.postgres) is not None


def slot_lag(config: LiveConfig) -> str | None:
    """The capture's replication slot: whether a capture is attached and the WAL it holds back; None
    when there is no slot (no capture ever ran)."""
    row = postgres.psql(
        config.postgres,
        "select active, pg_size_pretty(pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)) "
        f"from pg_replication_slots where slot_name = '{SLOT}'",
    )
    if not row:
        return None
    active, held = row.split("|")
    return f"slot {SLOT} {'in use' if active == 't' else 'idle'}, {held} of WAL not yet confirmed"
