"""dbt's command-line arguments, read in one place: the value of an option, the options every dbt
command of a run shares (target, project and profiles folders, paths, vars), and `--target`."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

# dbt options that concern every command of a run (parse, run-operation, build), not only build.
SHARED_OPTIONS = ("--target", "-t", "--target-path", "--log-path", "--project-dir", "--profiles-dir", "--vars")


def dbt_option(args: Sequence[str], *names: str) -> str | None:
    """The value of a dbt command-line option (`--target x`, `--target=x`, `-t x`), last one wins."""
    value = None
    for i, arg in enumerate(args):
        for name in names:
            if arg == name and i + 1 < len(args):
                value = args[i + 1]
            elif arg.startswith(name + "="):
                value = arg.split("=", 1)[1]
    return value


def target_of(args: Sequence[str]) -> str | None:
    """The `--target` (`-t`) among dbt arguments, if any."""
    return dbt_option(args, "--target", "-t")


def project_dir_of(args: Sequence[str], environ: Mapping[str, str] = os.environ) -> str | None:
    """The dbt project folder dbt itself uses: `--project-dir` among the arguments, else DBT_PROJECT_DIR
    (dbt reads it for every command); None for the caller's default."""
    return dbt_option(args, "--project-dir") or environ.get("DBT_PROJECT_DIR") or None


def target_args(target: str | None) -> list[str]:
    """`--target <target>`, or nothing for the profile's default."""
    return ["--target", target] if target else []


def split_shared_options(args: Sequence[str]) -> tuple[list[str], list[str]]:
    """(build-only arguments, options for every dbt command of the run), from `make run`'s arguments."""
    build: list[str] = []
    shared: list[str] = []
    i = 0
    while i < len(args):
        name = args[i].split("=", 1)[0]
        if name in SHARED_OPTIONS:
            takes_value = "=" not in args[i] and i + 1 < len(args)
            shared.extend(args[i : i + 2] if takes_value else args[i : i + 1])
            i += 2 if takes_value else 1
        else:
            build.append(args[i])
            i += 1
    return build, shared
