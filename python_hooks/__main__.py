"""Command line: `python -m python_hooks <command>`.

env         print the environment dbt runs with (paths, Iceberg jar, profiles dir)
write-pth   install the venv start-up hook that applies those defaults
evolve      the schema-evolution hook alone: evolve the current-state Iceberg tables
run         the pipeline once: the pre-dbt hooks, then `dbt build` (extra arguments go to dbt)
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from python_hooks import env
from python_hooks.pipeline import run_hooks, run_pipeline


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m python_hooks", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("command", choices=["env", "write-pth", "evolve", "run"])
    parser.add_argument("dbt_args", nargs=argparse.REMAINDER, help="passed to dbt build (run only)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    env.apply_defaults()
    if args.command == "write-pth":
        print(f"wrote {env.write_pth()}")
        return 0
    if args.command == "env":
        for name in [*env.defaults(), "ICEBERG_SPARK_RUNTIME_JAR"]:
            print(f"{name}={os.environ.get(name, '')}")
        return 0
    if args.command == "evolve":
        from dbt.cli.main import dbtRunner

        ok, problems, _ = run_hooks(dbtRunner())
        for problem in problems:
            logging.getLogger("python_hooks").error("refused: %s", problem)
        return 0 if ok else 1
    return 0 if run_pipeline(args.dbt_args) else 1


if __name__ == "__main__":
    sys.exit(main())
