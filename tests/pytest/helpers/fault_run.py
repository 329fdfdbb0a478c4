"""One process of a fault-injection test (tests/pytest/test_faults.py), started by the test as the
scheduler starts `make run`: in its own process group, on its own embedded warehouse.

    PYTHONPATH=.:tests/pytest python -m helpers.fault_run --landing L --schema S --target-path T \
        [--stage N[+M...] ...] [--producer dms|debezium ...] [--evolve dms_new_types] \
        [--land-to s3a://BUCKET/PREFIX] [--kill-at POINT[:TABLE]] [--dump FILE] [-- dbt build arguments]

For each --stage: land that sample stage (or stages N+M: all of them, then one run) of each --producer,
then run the pipeline
(python_hooks.pipeline.run_pipeline, what `make run` runs); --evolve lands a schema change after the
stages, before the last run. The last run has CDC_KILL_AT set when --kill-at is given: the process
kills itself at that point (python_hooks/project/faults.py), so it never gets further. With no --stage, one
run with nothing newly landed (the recovery). --land-to: the files are written to --landing (where the
test's replay reads them) and put under the same names below this landing root on S3, which the runs
read (CDC_LANDING_ROOT). --dump: after the runs, what the test compares, from
the same session: every table of the schema whole, its branches, and the ledger.
"""

from __future__ import annotations

import argparse
import os
import pickle
import sys
import time
from pathlib import Path

from helpers.paths import PROJECT


def land(landing: Path, producers: list[str], stage: int) -> None:
    from sample_data import debezium, dms

    writers = {"dms": dms.write_stage, "debezium": debezium.write_stage}
    for producer in producers:
        writers[producer](landing, stage)


def put_new_files(landing: Path, remote: str, sent: set[Path]) -> None:
    """Uploads the files of `landing` not sent before to the same names below `remote`."""
    from python_hooks.project import storage

    root = storage.Location.parse(remote)
    for path in sorted(p for p in landing.rglob("*") if p.is_file() and p not in sent):
        storage.upload(path, root.join(path.relative_to(landing).as_posix()))
        sent.add(path)


def dump(common: list[str], schema: str) -> dict:
    """{relation: {"columns": [...], "rows": [...], "branches": [...]}} for every table of the
    project's schemas, and the ledger's duplicated (model, file) pairs."""
    from python_hooks.project.sql import quote_ident
    from python_hooks.project.warehouse import Warehouse

    result: dict = {"tables": {}}
    with Warehouse.open(common) as warehouse:
        schemas = [row[0] for row in warehouse.query("show schemas") if row[0].startswith(f"{schema}_")]
        for name in schemas:
            for table in sorted(warehouse.tables(name)):
                relation = f"{quote_ident(name)}.{quote_ident(table)}"
                columns = [c for c, _ in warehouse.columns(name, table) or []]
                try:  # an Iceberg table's branches; a view has none
                    branches = [
                        r[0] for r in warehouse.query(f"select name from {relation}.refs where type = 'BRANCH'")
                    ]
                except Exception:  # noqa: BLE001 - not an Iceberg table
                    branches = None
                result["tables"][f"{name}.{table}"] = {
                    "columns": columns,
                    "rows": [tuple(row) for row in warehouse.query(f"select * from {relation}")],
                    "branches": branches,
                }
        result["ledger_duplicates"] = warehouse.query(
            f"select model_name, file_name, count(*) from {quote_ident(schema + '_cdc_meta')}.cdc_file_ledger"
            " group by model_name, file_name having count(*) > 1"
        )
    return result


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--landing", required=True, type=Path)
    parser.add_argument("--schema", required=True)
    parser.add_argument("--target-path", required=True, type=Path)
    parser.add_argument("--stage", action="append", default=[])
    parser.add_argument("--land-to")
    parser.add_argument("--producer", action="append", default=[])
    parser.add_argument("--evolve")
    parser.add_argument("--kill-at")
    parser.add_argument("--dump", type=Path)
    args, build = parser.parse_known_args()
    build = [a for a in build if a != "--"]
    os.environ["CDC_LANDING_ROOT"] = args.land_to or str(args.landing)
    sent: set[Path] = set()
    os.environ["CDC_SCHEMA"] = args.schema
    os.environ.pop("CDC_KILL_AT", None)

    from dbt.cli.main import dbtRunner

    from python_hooks.commands.run import run_pipeline
    from python_hooks.project import faults
    from sample_data import evolution

    runner = dbtRunner(callbacks=[faults.dbt_callback])
    common = ["--project-dir", str(PROJECT), "--target-path", str(args.target_path)]
    common += ["--log-path", str(args.target_path / "logs")]
    stages = args.stage or [None]
    for i, stage in enumerate(stages):
        last = i == len(stages) - 1
        for part in stage.split("+") if stage is not None else []:
            land(args.landing, args.producer or ["dms"], int(part))
        if last and args.evolve:
            getattr(evolution, args.evolve)(args.landing)
        if args.land_to:
            put_new_files(args.landing, args.land_to, sent)
        if last and args.kill_at:
            os.environ["CDC_KILL_AT"] = args.kill_at
        started = time.monotonic()
        ok = run_pipeline(build, runner=runner, common_args=common)
        seconds = time.monotonic() - started
        print(
            f"fault_run: run {i + 1} of {len(stages)} {'succeeded' if ok else 'FAILED'} in {seconds:.1f} s", flush=True
        )
        if not ok:
            return 3
    if args.kill_at:
        print(f"fault_run: kill point {args.kill_at} was never reached", flush=True)
        return 4
    if args.dump:
        with args.dump.open("wb") as out:
            pickle.dump(dump(common, args.schema), out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
