"""`python -m python_hooks env`: the environment dbt runs with, and where each value comes from."""

from __future__ import annotations

import os

from python_hooks.project import env


def env_lines(shell: bool) -> list[str]:
    """NAME=value lines (`shell`, for scripts), or a table: name, value, where it comes from."""
    if shell:
        return [f"{name}={os.environ.get(name, '')}" for name in [*env.defaults(), "CDC_TARGET", *env.JAR_VARIABLES]]
    rows = env.describe()
    lines = [
        "where each value comes from: environment = you set it, default = python_hooks/project/env.py "
        "(CDC_TARGET, CDC_SCHEMA: profiles/profiles.yml), unset = neither"
    ]
    name_width = max(len(name) for name, _, _ in rows)
    value_width = min(max(len(value) for _, value, _ in rows), 40)  # a long path overflows its column
    lines += [f"{name:<{name_width}}  {value or '-':<{value_width}}  {source}" for name, value, source in rows]
    return lines
