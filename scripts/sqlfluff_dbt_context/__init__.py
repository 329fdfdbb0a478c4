"""dbt's parse-time context for sqlfluff's jinja templater (see `.sqlfluff`).

sqlfluff's `apply_dbt_builtins` stubs `ref`, `source`, `config`, `var`, `is_incremental` and
`this`. The project's macros also read the names below. They get the values dbt gives them while
it parses a project (`execute` is false): models render the SQL they have before any query runs, so
linting needs no Spark session and never touches a warehouse. Module-level names become top-level
Jinja names (sqlfluff `library_path` on a package).
"""

from __future__ import annotations

import datetime as _dt
import json as _json
import os as _os
from typing import Any as _Any

execute = False
flags = None
invocation_id = "00000000-0000-0000-0000-000000000000"
run_started_at = _dt.datetime(2000, 1, 1, tzinfo=_dt.timezone.utc)


def env_var(name: str, default: str | None = None) -> str:
    """dbt's env_var(): the variable, else the default, else a placeholder (lint never fails on it)."""
    return _os.environ.get(name, default if default is not None else f"env_var_{name.lower()}")


def fromjson(value: str, default: _Any = None) -> _Any:
    try:
        return _json.loads(value)
    except (TypeError, ValueError):
        return default


def tojson(value: _Any, default: _Any = None) -> str:
    try:
        return _json.dumps(value)
    except (TypeError, ValueError):
        return default


class _Target:
    name = "local"
    type = "spark"
    schema = "lakehouse"
    database = None
    threads = 1


target = _Target()


class _Model:
    name = "this_model"
    resource_type = "model"
    config: dict[str, _Any] = {}
    meta: dict[str, _Any] = {}


model = _Model()


class _Adapter:
    @staticmethod
    def quote(identifier: str) -> str:
        return "`" + str(identifier).replace("`", "``") + "`"


adapter = _Adapter()


class _Exceptions:
    @staticmethod
    def raise_compiler_error(message: str) -> None:
        raise RuntimeError(message)

    @staticmethod
    def warn(message: str) -> str:
        return ""


exceptions = _Exceptions()
