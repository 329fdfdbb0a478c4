"""Command line: `python -m python_hooks <command>` (`--help` on any of them).

env             print the environment dbt runs with (target, paths, Iceberg jar, profiles dir)
write-pth       install the venv start-up hook that applies those defaults
evolve          the schema-evolution hook alone: evolve the current-state Iceberg tables
run             the pipeline once: the pre-dbt hooks, then `dbt build` (extra arguments go to dbt)
erase           right to be forgotten: erase a data subject's keys from every table, raw file and snapshot
rectify         right to rectification: correct a data subject's personal columns everywhere they are held
maintain        table maintenance: compaction, manifests, snapshot expiry, orphan files
cluster up      start the shared target on this machine: PostgreSQL metastore, Spark, Thrift Server
cluster down    stop what `cluster up` started
cluster status  what runs, on which ports, and the locks held in the metastore
"""

from __future__ import annotations

import logging
import os
import sys

import click

from python_hooks import env


def _logging() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)


@click.group(help=__doc__)
def main() -> None:
    env.apply_defaults()
    _logging()


@main.command("env", help="Print the environment dbt runs with.")
def env_command() -> None:
    for name in [*env.defaults(), "CDC_TARGET", "ICEBERG_SPARK_RUNTIME_JAR"]:
        click.echo(f"{name}={os.environ.get(name, '')}")


@main.command("write-pth", help="Install the venv start-up hook that applies the environment defaults.")
def write_pth() -> None:
    click.echo(f"wrote {env.write_pth()}")


@main.command(help="Evolve the current-state Iceberg tables' schemas from their raw files.")
def evolve() -> None:
    from dbt.cli.main import dbtRunner

    from python_hooks.pipeline import run_hooks

    ok, problems, _, _ = run_hooks(dbtRunner())
    for problem in problems:
        logging.getLogger("python_hooks").error("refused: %s", problem)
    sys.exit(0 if ok else 1)


@main.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.pass_context
def run(ctx: click.Context) -> None:
    """The pipeline once: the hooks, then `dbt build` (extra arguments go to dbt build)."""
    from python_hooks.pipeline import run_pipeline

    sys.exit(0 if run_pipeline(ctx.args) else 1)


@main.command(
    help="Erase data subjects everywhere: tables, raw landing files, older snapshots (README: Personal data)."
)
@click.option("--subject", required=True, help="The subject, as declared in meta.cdc_subjects (e.g. customer).")
@click.option("--key", "keys", multiple=True, required=True, help="A key of the subject to erase; repeat for more.")
@click.option("--reason", required=True, help="Why (e.g. the request's reference): kept in erasure_log.")
@click.option("--target", "-t", default=None, help="The dbt target (default: the profile's, CDC_TARGET).")
def erase(subject: str, keys: tuple[str, ...], reason: str, target: str | None) -> None:
    _personal_data("erase", subject, keys, (), reason, target)


@main.command(
    help="Rectify data subjects' personal columns everywhere: tables, history versions, raw landing files, older "
    "snapshots (README: Personal data)."
)
@click.option("--subject", required=True, help="The subject, as declared in meta.cdc_subjects (e.g. customer).")
@click.option("--key", "keys", multiple=True, required=True, help="A key of the subject; repeat for more.")
@click.option(
    "--set",
    "assignments",
    multiple=True,
    required=True,
    help="column=value: a personal column (meta.cdc_personal_data, as the source names it) and its correct value.",
)
@click.option("--reason", required=True, help="Why (e.g. the request's reference): kept in erasure_log.")
@click.option("--target", "-t", default=None, help="The dbt target (default: the profile's, CDC_TARGET).")
def rectify(subject: str, keys: tuple[str, ...], assignments: tuple[str, ...], reason: str, target: str | None) -> None:
    _personal_data("rectify", subject, keys, assignments, reason, target)


def _personal_data(
    action: str, subject: str, keys: tuple[str, ...], assignments: tuple[str, ...], reason: str, target: str | None
) -> None:
    from dbt.cli.main import dbtRunner

    from python_hooks import erase as erasure
    from python_hooks.warehouse import Warehouse

    common = ["--target", target] if target else []
    runner = dbtRunner()
    logger = logging.getLogger("python_hooks.erase")
    try:
        secret = erasure.secret_from_env()
        changes = erasure.parse_changes(assignments) if action == "rectify" else {}
        parsed = runner.invoke(["parse", "--quiet", *common])
        if (
            not parsed.success
            or not runner.invoke(["run-operation", "cdc_create_meta_tables", "--quiet", *common]).success
        ):
            raise erasure.ErasureError("dbt could not parse the project or reach the warehouse: see the errors above")
        with Warehouse.open(common) as warehouse:
            if action == "erase":
                report = erasure.erase(warehouse, parsed.result, subject, keys, reason, secret)
            else:
                report = erasure.rectify(warehouse, parsed.result, subject, keys, changes, reason, secret)
    except erasure.ErasureError as error:
        logger.error("%s refused: %s", action, error)
        sys.exit(1)
    for line in erasure.summary(report, action):
        click.echo(line)


@main.command("maintain")
@click.option("--target", "-t", default=None, help="dbt target: local or cluster (default: $CDC_TARGET, else local).")
@click.option(
    "--orphan-interval-hours",
    type=click.FloatRange(min=24),
    default=72.0,
    show_default=True,
    help="Remove only orphan files older than this: longer than any run writing beside maintenance.",
)
def maintain_command(target: str | None, orphan_interval_hours: float) -> None:
    """Maintain every Iceberg table of the project: compaction of the current-state tables, manifest
    rewrite, snapshot expiry by each model's `cdc_retention`, orphan-file removal
    (python_hooks/maintain.py). One line per table, a summary, details in logs/maintain.log."""
    import datetime as dt

    from python_hooks.maintain import run_maintenance

    dbt_args = ["--target", target] if target else []
    sys.exit(0 if run_maintenance(dbt_args, dt.timedelta(hours=orphan_interval_hours)) else 1)


@main.group(help="The shared target on this machine (python_hooks/cluster.py).")
def cluster() -> None:
    pass


@cluster.command("up", help="Start PostgreSQL, a Spark master and worker, and the Thrift Server.")
def cluster_up() -> None:
    from python_hooks import cluster as manager

    manager.up(manager.config_from_env())


@cluster.command("down", help="Stop what `cluster up` started, by PID.")
def cluster_down() -> None:
    from python_hooks import cluster as manager

    manager.down(manager.config_from_env())


@cluster.command("status", help="What runs; exits 1 unless every part does.")
def cluster_status() -> None:
    from python_hooks import cluster as manager

    sys.exit(0 if manager.status(manager.config_from_env()) else 1)


if __name__ == "__main__":
    main()
