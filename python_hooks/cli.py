"""The command line: `python -m python_hooks <command>` (`--help` on any of them).

env             print the environment dbt runs with, and where each value comes from (--shell: NAME=value lines)
write-pth       install the venv start-up hook that applies those defaults
jvm-classes     make the embedded driver JVM's class archive, which every later process maps (make install)
evolve          the schema-evolution hook alone: evolve the current-state Iceberg tables
run             the pipeline once: the pre-dbt hooks, then `dbt build` (extra arguments go to dbt);
                --every SECONDS: again and again until Ctrl-C / SIGTERM (after the run in progress)
                --maintain-every SECONDS (with --every): `maintain` in the loop's process
                --downstream-every SECONDS (with --every): snapshots and marts at most every SECONDS
erase           right to be forgotten: erase a data subject's keys from every table, raw file and snapshot
rectify         right to rectification: correct a data subject's personal columns everywhere they are held
maintain        table maintenance: compaction, manifests, snapshot expiry, orphan files
status          where each table stands: rows, last run, lag, files waiting and refused (--plot FILE.png)
add-source      add a source table from its landing folder: source entry, two one-line models, their ymls
docs            the dbt docs site with live row counts, and the docs coverage check
cluster up      start the shared target on this machine: PostgreSQL metastore, Spark, Thrift Server
cluster down    stop what `cluster up` started
cluster status  what runs, on which ports, and the locks held in the metastore
s3 up           start a local S3 server (SeaweedFS) on 127.0.0.1, make the bucket
s3 down         stop it
s3 status       what runs, where, and whether the bucket answers
s3 env          `export` lines of the AWS variables that reach it (env --shell lists them too)
live pg-up      start the private live source (PostgreSQL 15, logical decoding); --demo-schema: the shop tables
live pg-down    stop it
live capture    capture it with Debezium into the landing zone as the S3 sink writes (--detach: in the background)
live capture-stop  stop the capture cleanly
live workload   run transactions on the live source (inserts, updates, deletes, TRUNCATE, columns added)
live drain      wait until the capture has landed every change committed so far
live status     what runs, the replication slot, the files written
live compare    every live current-state table against its PostgreSQL table (exit 1 on a difference)
live demo       the live source end to end for a few minutes: the comparison and the latency (make demo-live)

Every command but `env --shell`, `s3 env` and `write-pth` first prints one line on stderr (stdout stays the
command's own output): the target, the warehouse and the landing zone, "(default)" where
python_hooks/project/env.py chose them, and the schema. Each command is a few lines here; its work
is in python_hooks/commands/ and the packages below it (python_hooks/__init__.py).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import sys
from pathlib import Path

import click

from python_hooks import cluster as shared_target
from python_hooks import live as live_source
from python_hooks import objectstore
from python_hooks.commands import downstream
from python_hooks.commands.add_source import run_add_source
from python_hooks.commands.docs import build_docs
from python_hooks.commands.environment import env_lines
from python_hooks.commands.jvm_classes import make_archive
from python_hooks.commands.live_compare import run_compare, run_drop_snapshots
from python_hooks.commands.live_demo import run_demo
from python_hooks.commands.loop import loop, with_maintenance
from python_hooks.commands.maintain import run_maintenance
from python_hooks.commands.personal_data import run_personal_data
from python_hooks.commands.run import make_runner, run_hooks, run_pipeline, runs_args, verbose
from python_hooks.commands.status import run_status
from python_hooks.project import env
from python_hooks.project.dbt_args import split_shared_options, target_args
from python_hooks.project.session import dbt_runner


class _Plain(logging.Formatter):
    """What a command says, as plain lines like the rest of its output; a warning or an error
    starts with its level."""

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        return text if record.levelno <= logging.INFO else f"{record.levelname}: {text}"


def _logging() -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(_Plain("%(message)s"))
    logging.basicConfig(level=logging.INFO, handlers=[handler])
    logging.getLogger("py4j").setLevel(logging.WARNING)


class _Commands(click.Group):
    """Keeps the chosen command's arguments for the group callback (the banner looks at them)."""

    def resolve_command(self, ctx: click.Context, args: list[str]):
        name, command, rest = super().resolve_command(ctx, args)
        ctx.meta["python_hooks.args"] = [name or "", *rest]
        return name, command, rest


# No banner: output read by scripts (`env --shell`, `s3 env`), and the venv's set-up (`write-pth`, `jvm-classes`).
_QUIET = {("env", "--shell"), ("write-pth", None), ("jvm-classes", None), ("s3", "env")}

# The options several commands share, declared once.
target_option = click.option(
    "--target", "-t", default=None, help="dbt target: local or cluster (default: $CDC_TARGET, else local)."
)
reason_option = click.option("--reason", required=True, help="Why (e.g. the request's reference): kept in erasure_log.")
subject_option = click.option(
    "--subject", required=True, help="The subject, as declared in meta.cdc_subjects (e.g. customer)."
)


@click.group(cls=_Commands, help="Python run around dbt: the pipeline, its state and its operations.")
@click.pass_context
def main(ctx: click.Context) -> None:
    env.apply_defaults()
    _logging()
    command, *args = ctx.meta.get("python_hooks.args") or [""]
    quiet = (command, None) in _QUIET or any((command, a) in _QUIET for a in args)
    if not quiet and not {"--help", "-h"} & set(args):
        env.announce(env.environ_for(args))  # on stderr, once per process


@main.command("env")
@click.option("--shell", is_flag=True, help="NAME=value lines only, as older versions printed (for scripts).")
def env_command(shell: bool) -> None:
    """Print the environment dbt runs with: each variable, its value, and where the value comes from
    (environment = you set it, default = python_hooks/project/env.py or the profile, unset = neither)."""
    for line in env_lines(shell):
        click.echo(line)


@main.command("write-pth", help="Install the venv start-up hook that applies the environment defaults.")
def write_pth() -> None:
    click.echo(f"wrote {env.write_pth()}")


@main.command("jvm-classes", help="Make the embedded driver JVM's class archive (make install runs it).")
def jvm_classes_command() -> None:
    try:
        make_archive()
    except Exception as error:  # noqa: BLE001 - any failure: every JVM starts as before, without it
        logging.getLogger("python_hooks").warning("jvm-classes: no archive made (%s): JVMs start without it", error)


@main.command(help="Evolve the current-state Iceberg tables' schemas from their raw files.")
def evolve() -> None:
    found = run_hooks(dbt_runner())
    for problem in found.problems:
        logging.getLogger("python_hooks").error("refused: %s", problem)
    sys.exit(0 if found.ok else 1)


@main.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.option(
    "--every",
    type=float,
    metavar="SECONDS",
    help="Run again every SECONDS (from one start to the next) until Ctrl-C or SIGTERM, which stop it after "
    "the run in progress; one loop per warehouse on this machine. With --full-refresh, the first run only "
    "rebuilds.",
)
@click.option("--runs", type=int, help="With --every: stop after this many runs.")
@click.option(
    "--maintain-every",
    type=click.FloatRange(min=1),
    metavar="SECONDS",
    help="With --every: `maintain` in the loop's process, after the run in progress, every SECONDS (on the "
    "embedded target the loop holds the warehouse, so `make maintain` beside it is refused).",
)
@click.option(
    "--downstream-every",
    type=click.FloatRange(min=1),
    metavar="SECONDS",
    help="With --every: the models and snapshots downstream of the current-state tables are built in the first "
    "run, then at most every SECONDS, while the tables take their batches at every run; a later run, or the next "
    "`make run`, builds what a run held back (python_hooks/commands/downstream.py).",
)
@click.pass_context
def run(
    ctx: click.Context,
    every: float | None,
    runs: int | None,
    maintain_every: float | None,
    downstream_every: float | None,
) -> None:
    """The pipeline once: the hooks, then `dbt build` (extra arguments go to dbt build)."""
    if every is None:
        if maintain_every is not None or downstream_every is not None:
            raise click.UsageError(
                "--maintain-every and --downstream-every go with --every (a loop); alone, run `maintain` or `run`"
            )
        sys.exit(0 if run_pipeline(ctx.args) else 1)
    runner = make_runner(progress=not verbose())  # one runner, one Spark session, for every run
    args = runs_args(ctx.args)  # --full-refresh: the first run only
    holds = downstream.cadence(downstream_every) if downstream_every is not None else (lambda: False)

    def turn() -> bool:
        return run_pipeline(args(), runner=runner, hold_downstream=holds())

    if maintain_every is not None:  # the target's options only (--target, --project-dir...), as `maintain` takes
        shared = split_shared_options(ctx.args)[1]
        turn = with_maintenance(turn, lambda: run_maintenance(shared), maintain_every)
    sys.exit(loop(every, turn, Path(env.local_state_dir()), runs))


@main.command(
    help="Erase data subjects everywhere: tables, raw landing files, older snapshots (docs/personal-data.md)."
)
@subject_option
@click.option("--key", "keys", multiple=True, required=True, help="A key of the subject to erase; repeat for more.")
@reason_option
@target_option
def erase(subject: str, keys: tuple[str, ...], reason: str, target: str | None) -> None:
    _echo_or_exit(run_personal_data("erase", subject, keys, (), reason, target_args(target)))


@main.command(
    help="Rectify data subjects' personal columns everywhere: tables, history versions, raw landing files, older "
    "snapshots (docs/personal-data.md)."
)
@subject_option
@click.option("--key", "keys", multiple=True, required=True, help="A key of the subject; repeat for more.")
@click.option(
    "--set",
    "assignments",
    multiple=True,
    required=True,
    help="column=value: a personal column (meta.cdc_personal_data, as the source names it) and its correct value.",
)
@reason_option
@target_option
def rectify(subject: str, keys: tuple[str, ...], assignments: tuple[str, ...], reason: str, target: str | None) -> None:
    _echo_or_exit(run_personal_data("rectify", subject, keys, assignments, reason, target_args(target)))


def _echo_or_exit(lines: list[str] | None) -> None:
    """A command's summary lines, or exit status 1 when it was refused (the refusal is logged)."""
    if lines is None:
        sys.exit(1)
    for line in lines:
        click.echo(line)


@main.command("maintain")
@target_option
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
    (python_hooks/commands/maintain.py). One line per table, a summary, details in logs/maintain.log."""
    sys.exit(0 if run_maintenance(target_args(target), dt.timedelta(hours=orphan_interval_hours)) else 1)


@main.group(help="The shared target on this machine (python_hooks/cluster/).")
def cluster() -> None:
    pass


@cluster.command("up", help="Start PostgreSQL, a Spark master and worker, and the Thrift Server.")
def cluster_up() -> None:
    shared_target.up(shared_target.config_from_env())


@cluster.command("down", help="Stop what `cluster up` started, by PID.")
def cluster_down() -> None:
    shared_target.down(shared_target.config_from_env())


@cluster.command("status", help="What runs; exits 1 unless every part does.")
def cluster_status() -> None:
    sys.exit(0 if shared_target.status(shared_target.config_from_env()) else 1)


@main.group(help="A local S3 server on this machine (python_hooks/objectstore/, docs/storage.md).")
def s3() -> None:
    pass


@s3.command("up", help="Start SeaweedFS on 127.0.0.1:$CDC_S3_PORT (8333), data in $CDC_S3_DIR, make the bucket.")
def s3_up() -> None:
    objectstore.up(objectstore.config_from_env())


@s3.command("down", help="Stop what `s3 up` started, by PID.")
def s3_down() -> None:
    objectstore.down(objectstore.config_from_env())


@s3.command("status", help="What runs and where; exits 1 unless it runs and answers.")
def s3_status() -> None:
    sys.exit(0 if objectstore.status(objectstore.config_from_env()) else 1)


@s3.command("env", help='`export` lines of the AWS variables that reach it: eval "$(python -m python_hooks s3 env)".')
def s3_env() -> None:
    lines = env_lines(shell=True, only_s3=True)
    if not lines:
        logging.getLogger("python_hooks").error("the local S3 server does not run: make s3-up")
        sys.exit(1)
    for line in lines:
        click.echo(f"export {line}")


@main.group(help="A live PostgreSQL source captured by Debezium into the landing zone (python_hooks/live/).")
def live() -> None:
    pass


@live.command(
    "pg-up", help="Start the private live source on 127.0.0.1:$CDC_LIVE_PG_PORT (15433) and create its database."
)
@click.option("--demo-schema", is_flag=True, help="Also create the demo's `shop` tables (make live-up, live demo).")
def live_pg_up(demo_schema: bool) -> None:
    live_source.source.up(live_source.config_from_env(), demo_schema=demo_schema)


@live.command("pg-down", help="Stop the live source by PID (its data stays in $CDC_LIVE_DIR/postgres).")
def live_pg_down() -> None:
    live_source.source.down(live_source.config_from_env())


@live.command("capture")
@click.option("--detach", is_flag=True, help="Run in the background; return once it streams.")
def live_capture(detach: bool) -> None:
    """Capture the live source with Debezium's embedded engine (initial snapshot, then streaming) into
    $CDC_LANDING_ROOT/debezium/topics/ as the Kafka Connect S3 sink writes Parquet, until SIGTERM or Ctrl-C."""
    config = live_source.config_from_env()
    if detach:
        live_source.capture.start(config)
    else:
        sys.exit(live_source.capture.run(config))


@live.command("capture-stop", help="Stop the capture by PID: its open files written, its offsets committed.")
def live_capture_stop() -> None:
    live_source.capture.stop(live_source.config_from_env())


@live.command("workload")
@click.option("--seed", type=int, default=28, show_default=True, help="The random generator's seed.")
@click.option(
    "--rounds", type=click.IntRange(min=0), default=20, show_default=True, help="Random transactions at the end."
)
@click.option("--only-seed", is_flag=True, help="Only fill empty tables (what an initial snapshot reads).")
@click.option("--pause-ms", type=click.IntRange(min=0), default=0, help="Milliseconds to wait after each transaction.")
def live_workload(seed: int, rounds: int, only_seed: bool, pause_ms: int) -> None:
    """Transactions on the live source (python_hooks/live/workload.py): fills empty tables first, then
    inserts, updates, deletes, several changes of a key in one transaction, a TRUNCATE, a column added,
    a column widened to bigint, TOASTed values left unchanged."""
    live_source.workload.run(live_source.config_from_env(), seed, rounds, only_seed, pause_ms / 1000)


@live.command("drain", help="Wait until the capture has landed every change committed so far.")
@click.option("--timeout", type=float, default=120, show_default=True, help="Seconds to wait.")
def live_drain(timeout: float) -> None:
    config = live_source.config_from_env()
    seconds = live_source.capture.drain(config, timeout)
    logging.getLogger("python_hooks").info(
        "live: every committed change is in %s (%.1f s)", config.topics_root, seconds
    )


@live.command(
    "status", help="What runs, the replication slot, the files written; exits 1 unless source and capture run."
)
def live_status() -> None:
    sys.exit(0 if live_source.capture.status(live_source.config_from_env()) else 1)


@live.command("compare")
@target_option
def live_compare(target: str | None) -> None:
    """Every live current-state table (models/*/shop/, built with CDC_LIVE=1) against its PostgreSQL
    table: the same keys, columns of the mapped types, every value equal (python_hooks/live/compare.py).
    One line per table; exit status 1 on a difference. After the workload, `live drain` and a run."""
    sys.exit(0 if run_compare(live_source.config_from_env(), target_args(target)) else 1)


@live.command("drop-snapshots")
@target_option
def live_drop_snapshots(target: str | None) -> None:
    """Drop the dbt snapshots built on the live tables, so that their history starts again at the next run
    (a fresh live database: `live demo` calls it first). The other snapshots stay."""
    sys.exit(0 if run_drop_snapshots(live_source.config_from_env(), target_args(target)) else 1)


@live.command("demo")
@click.option("--every", type=click.FloatRange(min=1), default=10.0, show_default=True, help="Seconds between runs.")
@click.option(
    "--minutes", type=click.FloatRange(min=0.1), default=2.0, show_default=True, help="The workload's length."
)
@click.option(
    "--downstream-every",
    type=click.FloatRange(min=1),
    default=300.0,
    show_default=True,
    help="The loop's --downstream-every: the snapshot and the models that feed it at most this often.",
)
def live_demo(every: float, minutes: float, downstream_every: float) -> None:
    """The live source end to end (python_hooks/commands/live_demo.py): PostgreSQL, the capture, `run --every`,
    a workload of MINUTES, then the comparison with PostgreSQL and the latency; everything stopped afterwards.
    Starts from an empty live database (its folder, $CDC_LIVE_DIR, is emptied). Exit 1 on a difference."""
    sys.exit(0 if run_demo(live_source.config_from_env(), every, minutes, [], downstream_every=downstream_every) else 1)


@main.command("docs")
@target_option
def docs_command(target: str | None) -> None:
    """The dbt docs site with live row counts, then the docs coverage check (`make docs`,
    python_hooks/commands/docs.py): dbt parse, dbt docs generate --static, select count(*) of every table into
    catalog.json, the columns schema evolution added as warnings. Exit 1 on a documentation gap."""
    sys.exit(build_docs(target_args(target), echo=click.echo))


@main.command("add-source")
@click.argument("producer", type=click.Choice(["dms", "debezium"]))
@click.argument("names", nargs=-1, required=True, metavar="<schema> <table> | <topic>")
@click.option("--key", "keys", multiple=True, required=True, help="The key column(s): col[,col] (or repeat --key).")
@click.option("--source-name", default=None, help="The dbt source (default: the DMS schema, the topic's database).")
@click.option("--table-name", default=None, help="The dbt table name (default: the DMS table, the topic's table).")
@click.option(
    "--timestamp-column",
    default=None,
    help="DMS only: the endpoint's TimestampColumnName (default: the existing source's, else last_update_time).",
)
@click.option(
    "--project-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=env.PROJECT_ROOT,
    show_default=True,
    help="The dbt project to write into.",
)
def add_source_command(
    producer: str,
    names: tuple[str, ...],
    keys: tuple[str, ...],
    source_name: str | None,
    table_name: str | None,
    timestamp_column: str | None,
    project_dir: Path,
) -> None:
    """Add a source table from the Parquet footers of its landing folder (python_hooks/sources/):

    \b
      add-source dms <schema> <table> --key col[,col]
      add-source debezium <server.database.table> --key col[,col]

    Writes the source entry (appended to the source's yml when the source exists), the staging and
    current-state one-line models and a models yml for each; refuses, writing nothing, if a file or
    model exists or a key column is missing from a raw file."""
    landing_root = os.environ["CDC_LANDING_ROOT"]
    target = os.environ.get("CDC_TARGET") or "local"
    _echo_or_exit(
        run_add_source(
            project_dir, producer, names, keys, source_name, table_name, timestamp_column, landing_root, target
        )
    )


@main.command("status")
@target_option
@click.option(
    "--plot",
    "plot_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also draw, per table, the lag and the rows changed per run over time, as a PNG at this path.",
)
def status_command(target: str | None, plot_path: Path | None) -> None:
    """Where each current-state table stands (python_hooks/commands/status.py): rows, the last run and its
    counts, lag, files waiting and refused, the last schema change. Exits 1 when a table's newest
    batch was refused or its lag passes its source's freshness error_after."""
    sys.exit(run_status(target_args(target), plot_path, echo=click.echo))
