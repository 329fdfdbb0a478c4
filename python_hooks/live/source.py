"""The live source database: a private PostgreSQL 15 with logical decoding (wal_level=logical) in
$CDC_LIVE_DIR/postgres, on 127.0.0.1:$CDC_LIVE_PG_PORT, holding the database `shopdb`; or a server of
one's own named by CDC_LIVE_CONFIG (config.py), which nothing here starts, stops or changes.

`up` starts the private server and creates the configured database; with `demo_schema` also the demo's
`shop` tables (schema.sql; each step safe to run again); `down` stops it by PID and leaves its data;
`slot_lag` tells what the capture's replication slot holds back.
"""

from __future__ import annotations

import logging
from pathlib import Path

import psycopg

from python_hooks.live.config import DATABASE, TABLES, LiveConfig
from python_hooks.project import postgres

log = logging.getLogger(__name__)

SCHEMA_SQL = Path(__file__).with_name("schema.sql")


def pg_string(value: str) -> str:
    """A PostgreSQL string literal (standard_conforming_strings: only the quote doubled)."""
    return "'" + value.replace("'", "''") + "'"


def up(config: LiveConfig, demo_schema: bool = False) -> None:
    """Start the private server unless it runs, create the configured database; with `demo_schema` the
    demo's tables in `shopdb` too. Harmless twice. Refused for an external server (CDC_LIVE_CONFIG's host)."""
    if config.external:
        raise SystemExit(
            f"live pg-up: the source is {config.pg_host}:{config.pg_port}/{config.database} (CDC_LIVE_CONFIG),"
            " a server of your own: start it yourself; pg-up starts only the private server"
        )
    postgres.start(config.postgres)
    for database in dict.fromkeys([config.database, *([DATABASE] if demo_schema else [])]):
        if not postgres.psql(config.postgres, f"select 1 from pg_database where datname = {pg_string(database)}"):
            postgres.psql(config.postgres, f'create database "{database}"')
            log.info("live postgres: database %s created", database)
    if demo_schema:
        postgres.psql(config.postgres, SCHEMA_SQL.read_text(), database=DATABASE)
        log.info("live postgres: the demo's tables %s in %s", ", ".join(t.qualified for t in TABLES), DATABASE)
    log.info(
        "live postgres: database %s ready at %s (captured: %s); log %s",
        config.database,
        config.conninfo(),
        ", ".join(table.qualified for table in config.tables),
        config.postgres.log_file,
    )


def down(config: LiveConfig) -> None:
    """Stop the private server by PID; its data stays for the next `up`. An external server is left alone."""
    if config.external:
        log.info("live postgres: %s is a server of your own: left running", config.pg_host)
        return
    postgres.stop(config.postgres)


def running(config: LiveConfig) -> bool:
    """The private server runs; an external one answers."""
    if not config.external:
        return postgres.running_pid(config.postgres) is not None
    try:
        with psycopg.connect(config.conninfo(), connect_timeout=5, **config.connect_kwargs()) as connection:
            connection.execute("select 1")
        return True
    except psycopg.Error:
        return False


def query(config: LiveConfig, sql: str) -> list[tuple]:
    """Rows of a query on the configured database, as the configured user."""
    with psycopg.connect(config.conninfo(), autocommit=True, **config.connect_kwargs()) as connection:
        cursor = connection.execute(sql)
        return cursor.fetchall() if cursor.description else []


def slot_lag(config: LiveConfig) -> str | None:
    """The capture's replication slot: whether a capture is attached and the WAL it holds back; None
    when there is no slot (no capture ever ran)."""
    rows = query(
        config,
        "select active, pg_size_pretty(pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)) "
        f"from pg_replication_slots where slot_name = {pg_string(config.slot)}",
    )
    if not rows:
        return None
    active, held = rows[0]
    return f"slot {config.slot} {'in use' if active else 'idle'}, {held} of WAL not yet confirmed"
