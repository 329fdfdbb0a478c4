"""`make demo`: land the sample change files stage by stage and run the pipeline after each stage.

Stage 1 is the initial load (DMS full load, Debezium snapshot); stages 2-4 are CDC batches with the
hard cases (see sample_data/dms.py and sample_data/debezium.py); stage 5 changes source schemas: the
seed's `ALTER TABLE customer ADD COLUMN status ...; UPDATE customer SET status = 'Green'` in MySQL,
and new decimal and date columns in the CRM (sample_data/evolution.py). After each stage it prints, per
current-state table, its rows and what that run inserted, updated, deleted, ignored and refused, and
the lag, from the batch log (python_hooks/commands/status.py); dbt's own lines go to logs/dbt.log
(CDC_VERBOSE=1 shows them). It starts from scratch each time: it
deletes the sample folders and, on the embedded target, the warehouse, so it refuses to run on paths
outside data/; on the cluster target (CDC_TARGET=cluster) it drops the demo's schemas instead (the
metastore is shared), through the same dbt adapter as the pipeline (python_hooks/project/warehouse.py).
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
from pathlib import Path

from python_hooks import personal_data as erasure
from python_hooks.commands import status as table_status
from python_hooks.commands.run import make_runner, run_pipeline, verbose
from python_hooks.project import embedded_lock, env, object_store, storage
from python_hooks.project.session import Session
from python_hooks.project.sql import quote_ident
from python_hooks.project.warehouse import Warehouse
from sample_data import debezium, dms, evolution

log = logging.getLogger("demo")

DEMO_ERASURE_SECRET = "demo-only-erasure-secret-0000"  # a demo's, never a deployment's
DEMO_ERASED_CUSTOMER = "5"


def _inside(path: Path, root: Path) -> bool:
    return path.resolve().is_relative_to(root.resolve())


def _local_server_only(where: storage.Location) -> None:
    """On S3 the demo deletes only on the local server of `make s3-up` (or under an empty prefix)."""
    if object_store.is_local_endpoint() or not where.files():
        return
    raise SystemExit(
        f"make demo starts from scratch and deletes {where}; on S3 it only does that on the local server of"
        " make s3-up (elsewhere, only under a prefix that is empty). Point CDC_LANDING_ROOT / CDC_WAREHOUSE at"
        " an empty prefix, or unset them to use the defaults."
    )


def _reset(landing: storage.Location, warehouse: storage.Location, state: Path, target: str) -> None:
    data = env.PROJECT_ROOT / "data"
    local = [(landing, "CDC_LANDING_ROOT")]
    if target == "local":
        local += [(warehouse, "CDC_WAREHOUSE"), (storage.Location.parse(str(state)), "CDC_STATE_DIR")]
    for where, variable in local:
        if where.is_s3:
            _local_server_only(where)
            continue
        path = where.local_path
        if not _inside(path, data) and path.exists() and any(path.iterdir()):
            raise SystemExit(
                f"make demo starts from scratch and deletes {path} ({variable}); it only does that under {data}"
                f" (elsewhere, only to a folder that does not exist yet or is empty). Unset {variable} to use the"
                " default."
            )
    if target == "local":  # the warehouse's state (its Derby metastore) never while another process has it open
        try:
            embedded_lock.acquire(state)
        except embedded_lock.WarehouseInUse as error:
            raise SystemExit(f"make demo deletes nothing: {error}") from None
    folders = [landing.join(f"dms/{dms.SCHEMA}"), landing.join("debezium")]
    if target == "local":
        folders.append(warehouse)
    for folder in folders:
        storage.delete_tree(folder)
    if target == "local":
        shutil.rmtree(state, ignore_errors=True)  # the Derby metastore of a warehouse on S3, the hooks' state
        embedded_lock.release()  # its lock file went with the folder: the demo's session takes it again
    shutil.rmtree(_outbox(landing), ignore_errors=True)


def _outbox(landing: storage.Location) -> Path:
    """Where the sample files are written before they are put on S3 (the writers, and the replays of
    the tests, work on local folders; a producer would write to S3 directly)."""
    return env.PROJECT_ROOT / "data" / "demo-outbox" / landing.bucket if landing.is_s3 else landing.local_path


def _land(written: list[Path], landing: storage.Location) -> None:
    """On S3: put the files just written to the outbox under the same names below the landing root."""
    if not landing.is_s3:
        return
    outbox = _outbox(landing)
    for path in written:
        storage.upload(path, landing.join(path.relative_to(outbox).as_posix()))


def drop_schemas(warehouse: Warehouse, schema: str) -> list[str]:
    """Drops `schema` and every `<schema>_*` schema (views, then tables with their files): each table
    through its catalog, so that the Thrift Server's Iceberg catalog forgets it too."""
    dropped = []
    for (name,) in warehouse.query("show databases"):
        if name != schema.lower() and not name.startswith(schema.lower() + "_"):
            continue
        views = {row[1] for row in warehouse.query(f"show views in {quote_ident(name)}") if not row[2]}
        for view in sorted(views):
            warehouse.execute(f"drop view if exists {quote_ident(name)}.{quote_ident(view)}")
        for row in warehouse.query(f"show tables in {quote_ident(name)}"):
            if not row[2] and row[1] not in views:
                warehouse.execute(f"drop table if exists {quote_ident(name)}.{quote_ident(row[1])} purge")
        warehouse.execute(f"drop database if exists {quote_ident(name)} cascade")
        dropped.append(name)
    return dropped


def main() -> int:
    env.apply_defaults()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    landing = storage.Location.parse(os.environ["CDC_LANDING_ROOT"])
    warehouse = storage.Location.parse(os.environ["CDC_WAREHOUSE"])
    schema = os.environ.get("CDC_SCHEMA", "lakehouse")
    target = os.environ.get("CDC_TARGET") or "local"
    if not os.environ.get(erasure.SECRET_ENV):
        # Before the Spark session starts: Spark reads the secret from its JVM's environment.
        os.environ[erasure.SECRET_ENV] = DEMO_ERASURE_SECRET
        log.info("%s is not set: the demo's erasure uses a demo-only secret", erasure.SECRET_ENV)
    env.announce()
    _reset(landing, warehouse, Path(env.local_state_dir()), target)
    if target != "local":
        with Warehouse.open() as shared:
            dropped = drop_schemas(shared, schema)
        log.info("dropped the demo's schemas from the %s target: %s", target, ", ".join(dropped) or "none yet")

    runner = make_runner(progress=not verbose())
    outbox = _outbox(landing)
    stages = dms.STAGES + 1
    for stage in range(1, stages + 1):
        if stage <= dms.STAGES:
            written = dms.write_stage(outbox, stage) + debezium.write_stage(outbox, stage)
        else:
            written = evolution.mysql_status_column(outbox) + evolution.dms_new_types(outbox)
            log.info(
                "\nstage %d: the sources' schemas change: MySQL salesdb.customer gains `status` "
                "(set to 'Green' everywhere), CRM customer_master gains credit_limit decimal(18,4) "
                "and birth_date date",
                stage,
            )
        _land(written, landing)
        log.info("\n=== stage %d of %d: %d raw files landed under %s ===", stage, stages, len(written), landing)
        if not run_pipeline(runner=runner):
            log.error("stage %d: the pipeline failed", stage)
            return 1

    with Warehouse.open() as warehouse_sql:
        _report(warehouse_sql, schema)
    erased = _erase_one(runner, schema)
    with Session.start(runner=runner) as session:
        _final_summary(session.warehouse, session.manifest, schema)
    return erased


def _erase_one(runner, schema: str) -> int:
    """The demo's last step: a customer asks to be forgotten (docs/personal-data.md)."""
    log.info(
        "\n=== erasure: customer %s asks to be forgotten (python -m python_hooks erase --subject customer --key %s)",
        DEMO_ERASED_CUSTOMER,
        DEMO_ERASED_CUSTOMER,
    )
    try:
        with Session.start(runner=runner) as session:
            report = erasure.erase(
                session.warehouse, session.manifest, "customer", [DEMO_ERASED_CUSTOMER], "make demo: an erasure request"
            )
            left = session.warehouse.query(
                f"select count(*) from {schema}_marts.dim_customer where customer_id = {DEMO_ERASED_CUSTOMER}"
            )[0][0]
    except erasure.ErasureError as error:
        if os.environ.get("CDC_TARGET", "local") != "local":
            # The cluster's Thrift Server reads the secret from the environment `make cluster-up` had.
            log.warning("erasure skipped: %s", error)
            return 0
        log.error("erasure refused: %s", error)
        return 1
    for line in erasure.summary(report):
        log.info(line)
    log.info("dim_customer versions of customer %s left: %d", DEMO_ERASED_CUSTOMER, left)
    return 0


def _final_summary(warehouse: Warehouse, manifest, schema: str) -> None:
    """The demo's last lines: per current-state table, its rows now and what the demo's runs did to
    it, from the batch log (python_hooks/commands/status.py reads the same)."""
    statuses = table_status.collect(warehouse, manifest)
    rows = table_status.log_rows(warehouse)
    log.info("\n=== demo summary: %d runs, per table (%s_cdc_meta.cdc_batch_log) ===", dms.STAGES + 1, schema)
    header = ("table", "rows", "runs", "changes", "inserted", "updated", "deleted", "ignored", "refused")
    log.info("  %-22s %5s %5s %8s %8s %8s %8s %8s %8s  %s", *header, "lag")
    for s in statuses:
        mine = [row for row in rows if row["model_name"] == s.model]
        applied = [row for row in mine if row["status"] == "applied"]
        log.info(
            "  %-22s %5s %5d %8d %8d %8d %8d %8d %8d  %s",
            s.model,
            "-" if s.rows is None else s.rows,
            len(mine),
            sum(row["change_events"] for row in applied),
            sum(row["rows_inserted"] for row in applied),
            sum(row["rows_updated"] for row in applied),
            sum(row["rows_deleted"] for row in applied),
            sum(table_status.ignored(row) for row in applied),
            sum(row["files_refused"] for row in mine),
            table_status.duration(s.lag_seconds),
        )
    log.info("(rows now: after the erasure of customer %s, which the batch log does not count)", DEMO_ERASED_CUSTOMER)


def _report(warehouse: Warehouse, schema: str) -> None:
    log.info("\nschema evolution log (%s_cdc_meta.schema_evolution_log):", schema)
    for table_name, column_name, action, old_type, new_type in warehouse.query(
        f"select table_name, column_name, action, old_type, new_type "
        f"from {schema}_cdc_meta.schema_evolution_log order by applied_at"
    ):
        log.info("  %s.%s: %s %s -> %s", table_name, column_name, action, old_type or "-", new_type)
    statuses = warehouse.query(f"select status, count(*) as n from {schema}_current.salesdb__customer group by status")
    log.info("salesdb__customer.status now: %s", dict(statuses))

    log.info("\nSCD2: customers with several versions (%s_marts.dim_customer):", schema)
    for row in warehouse.query(
        f"select customer_id, customer_sk, valid_from, valid_to, is_current, is_deleted "
        f"from {schema}_marts.dim_customer where customer_id in ("
        f"  select customer_id from {schema}_marts.dim_customer group by customer_id having count(*) > 2)"
        f" order by customer_id, valid_from limit 6"
    ):
        log.info("  customer %s  sk %s  %s -> %s  current=%s deleted=%s", *row)
    log.info("\norders joined to the customer version valid at order_ts (%s_marts.fct_sales_order):", schema)
    for row in warehouse.query(
        f"select f.order_id, f.order_ts, f.customer_sk, d.valid_from, d.valid_to "
        f"from {schema}_marts.fct_sales_order f join {schema}_marts.dim_customer d on f.customer_sk = d.customer_sk "
        f"where f.customer_sk <> -1 order by f.order_ts desc limit 8"
    ):
        log.info("  order %s at %s -> customer_sk %s (valid %s -> %s)", *row)
    target = "" if warehouse.target == "local" else f" --target {warehouse.target}"
    log.info(
        "\nExplore: source .venv/bin/activate && dbt show%s --inline \"select * from {{ ref('salesdb__customer') }}\"",
        target,
    )
    log.info("Where each table stands: make status (python -m python_hooks status --plot lag.png). Docs: make docs")


if __name__ == "__main__":
    sys.exit(main())
