"""Command line: `python -m python_hooks <command>`.

    env         print the environment dbt runs with (paths, Iceberg jar, profiles dir)
    write-pth   install the venv start-up hook that applies those defaults
    run         the pipeline once: the pre-dbt hooks, then `dbt run`, then `dbt test`
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from python_hooks import env


def _run_pipeline() -> int:
    from dbt.cli.main import dbtRunner

    runner = dbtRunner()
    result = runner.invoke(["run"])
    if not result.success:
        return 1
    result = runner.invoke(["test"])
    return 0 if result.success else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m python_hooks", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["env", "write-pth", "run"])
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    env.apply_defaults()
    if args.command == "write-pth":
        print(f"wrote {env.write_pth()}")
        return 0
    if args.command == "env":
        for name in [*env.defaults(), "ICEBERG_SPARK_RUNTIME_JAR"]:
            print(f"{name}={os.environ.get(name, '')}")
        return 0
    return _run_pipeline()


if __name__ == "__main__":
    sys.exit(main())
