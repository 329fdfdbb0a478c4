"""`python -m python_hooks live compare`: every live current-state table against its PostgreSQL table
(python_hooks/live/compare.py), one line per table, then one line per dbt snapshot of a live table (its
versions and keys; its latest versions against the table); exit status 1 on a difference. Run it after the
workload has stopped, `live drain` and a run (`CDC_LIVE=1 python -m python_hooks run`)."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import PurePosixPath

import psycopg

from python_hooks.live.compare import SnapshotComparison, TableComparison, compare_snapshot, compare_table
from python_hooks.live.config import LiveConfig
from python_hooks.project.session import Session, SessionError
from python_hooks.project.sql import quoted_relation
from python_hooks.project.tables import CdcTable, cdc_tables

log = logging.getLogger("python_hooks.live")

LIVE_MODELS = "CDC_LIVE"  # dbt_project.yml builds the live source's models only when it is 1


def compare_live(config: LiveConfig, dbt_args: Sequence[str], session: Session | None = None) -> list[TableComparison]:
    """One comparison per live table; a table without a current-state model is a difference too.
    `session`: the caller's (a test's, in its process), parsed with the live models enabled."""
    own = session is None
    session = session or live_session(dbt_args)
    try:
        models = live_models(config, session.manifest)
        results = []
        with psycopg.connect(config.conninfo(), **config.connect_kwargs()) as connection:
            for table in config.tables:
                model = models.get(table.topic)
                if model is None:
                    missing = TableComparison(table.name, "?")
                    missing.differences.append(
                        f"no current-state model reads topic {table.topic} ({config.topic_dir(table.topic)}):"
                        f" `add-source debezium {table.topic} --key {','.join(table.key)}`"
                    )
                    results.append(missing)
                    continue
                results.append(compare_table(connection, session.warehouse, table, model.schema, model.identifier))
        return results
    finally:
        if own:
            session.close()


def live_models(config: LiveConfig, manifest) -> dict[str, CdcTable]:
    """topic -> the current-state model whose source reads that topic's landing folder."""
    topics = {table.topic for table in config.tables}
    found = {}
    for model in cdc_tables(manifest):
        topic = PurePosixPath(model.folder.path.rstrip("/")).name
        if model.producer.startswith("debezium") and topic in topics:
            found[topic] = model
    return found


def live_snapshots(session: Session, config: LiveConfig) -> list[tuple[object, CdcTable]]:
    """The dbt snapshots built on one live current-state table each (through models between them,
    e.g. `shop_customer_snapshot` over `int_shop__customer_versions` over `shop__customer`), with it."""
    models = {t.model: t for t in live_models(config, session.manifest).values()}
    found = []
    for node in session.manifest.nodes.values():
        if node.resource_type != "snapshot":
            continue
        followed = _live_ancestors(session.manifest, node, set(models))
        if len(followed) == 1:  # on no live table, or on several (a join), there is nothing one table can say
            found.append((node, models[followed.pop()]))
    return found


def compare_live_snapshots(session: Session, config: LiveConfig) -> list[SnapshotComparison]:
    """One comparison per dbt snapshot built on a live current-state table."""
    return [
        compare_snapshot(
            session.warehouse,
            (node.schema, node.alias or node.name),
            (table.schema, table.identifier),
            table.keys,
        )
        for node, table in live_snapshots(session, config)
    ]


def drop_live_snapshots(session: Session, config: LiveConfig) -> list[str]:
    """Drops the snapshots of the live tables (a fresh database's history starts again; an earlier
    demo's snapshot may hold columns this one's source no longer has). The relations dropped."""
    dropped = []
    for node, _table in live_snapshots(session, config):
        name = node.alias or node.name
        if session.warehouse.table_exists(node.schema, name):
            session.warehouse.execute(f"drop table if exists {quoted_relation(node.schema, name)}")
            dropped.append(f"{node.schema}.{name}")
    return dropped


def _live_ancestors(manifest, node, live_models: set[str]) -> set[str]:
    """The live current-state models among `node`'s ancestors (the first met on each path)."""
    found, seen, waiting = set(), set(), list(node.depends_on.nodes)
    while waiting:
        unique_id = waiting.pop()
        parent = manifest.nodes.get(unique_id)
        if unique_id in seen or parent is None:
            continue
        seen.add(unique_id)
        if parent.name in live_models:
            found.add(parent.name)
        else:
            waiting.extend(parent.depends_on.nodes)
    return found


def live_session(dbt_args: Sequence[str]) -> Session:
    """A session parsed with the live models enabled; SystemExit with dbt's reason when it cannot start."""
    os.environ[LIVE_MODELS] = "1"
    try:
        return Session.start(dbt_args)
    except SessionError as error:
        raise SystemExit(str(error)) from error


def run_compare(config: LiveConfig, dbt_args: Sequence[str]) -> bool:
    """The comparison's lines (logged); True when every table and snapshot is equal."""
    with live_session(dbt_args) as session:
        results = [*compare_live(config, dbt_args, session=session), *compare_live_snapshots(session, config)]
    for result in results:
        (log.info if result.equal else log.error)("live compare: %s", result.line())
    return all(result.equal for result in results)


def run_drop_snapshots(config: LiveConfig, dbt_args: Sequence[str]) -> bool:
    """`live drop-snapshots`: one line per snapshot dropped, or one saying there was none."""
    with live_session(dbt_args) as session:
        dropped = drop_live_snapshots(session, config)
    for relation in dropped:
        log.info("live: dropped the snapshot %s (its history starts again at the next run)", relation)
    if not dropped:
        log.info("live: no snapshot of a live table to drop")
    return True
