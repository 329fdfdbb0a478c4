"""`python -m python_hooks env`: the environment dbt runs with, and where each value comes from."""

from __future__ import annotations

import os
import shlex

from python_hooks.project import env, object_store


def env_lines(shell: bool, only_s3: bool = False) -> list[str]:
    """NAME=value lines (`shell`, for scripts), or a table: name, value, where it comes from. While
    the local S3 server of `s3 up` runs, both end with the AWS variables that reach it (`only_s3`:
    those lines alone, none when it does not run)."""
    s3 = object_store.shell_variables()
    if shell:
        names = [] if only_s3 else [*env.defaults(), "CDC_TARGET", *env.JAR_VARIABLES, "CDC_STATE_DIR"]
        values = [(name, os.environ.get(name, "")) for name in names] + s3
        return [f"{name}={shlex.quote(value) if value else ''}" for name, value in values]
    rows = env.describe() + [
        (name, "(development key)" if name == "AWS_SECRET_ACCESS_KEY" else value, "local S3 server (s3 up)")
        for name, value in s3
    ]
    lines = [
        "where each value comes from: environment = you set it, default = python_hooks/project/env.py "
        "(CDC_TARGET, CDC_SCHEMA: profiles/profiles.yml), unset = neither"
    ]
    name_width = max(len(name) for name, _, _ in rows)
    value_width = min(max(len(value) for _, value, _ in rows), 40)  # a long path overflows its column
    lines += [f"{name:<{name_width}}  {value or '-':<{value_width}}  {source}" for name, value, source in rows]
    return lines
