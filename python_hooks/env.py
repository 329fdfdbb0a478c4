"""Runtime environment for dbt and the hooks: paths, the Iceberg jar, the dbt profile.

The dbt profile (profiles/profiles.yml) reads everything machine-specific from environment
variables. This module gives each one a default, so that `dbt run` works in the project's venv
with nothing exported:

    DBT_PROFILES_DIR           <project>/profiles
    CDC_TARGET                 local                        (dbt target: local | cluster)
    CDC_LANDING_ROOT           <project>/data/landing       (raw change files)
    CDC_WAREHOUSE              <project>/data/warehouse     (Iceberg tables + Derby metastore)
                               <project>/data/cluster/warehouse  when CDC_TARGET=cluster (the
                               cluster's tables, its metastore is in PostgreSQL)
    ICEBERG_SPARK_RUNTIME_JAR  found in the installed snowpark-connect-deps-iceberg package

Values the user set win; relative paths are made absolute (Spark resolves a relative table
location against the warehouse, not the working directory). `make` installs a `.pth` file into
the venv (`python -m python_hooks write-pth`) that calls `apply_defaults()` at interpreter
start-up (`startup()`), which is how a plain `dbt` in the activated venv sees them.
"""

from __future__ import annotations

import importlib.util
import os
import sysconfig
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
ICEBERG_JAR_PACKAGE = "snowpark_connect_deps_iceberg"
ICEBERG_JAR_NAME = "iceberg-spark-runtime-3.5_2.12-1.9.2.jar"
PTH_NAME = "cdc_lakehouse.pth"


def find_iceberg_jar() -> Path:
    """Path of Iceberg's Spark 3.5 / Scala 2.12 runtime jar; ICEBERG_SPARK_RUNTIME_JAR wins."""
    override = os.environ.get("ICEBERG_SPARK_RUNTIME_JAR")
    if override:
        return Path(override).resolve()
    spec = importlib.util.find_spec(ICEBERG_JAR_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"Python package {ICEBERG_JAR_PACKAGE!r} is not installed: run `make install`, "
            "or set ICEBERG_SPARK_RUNTIME_JAR to an iceberg-spark-runtime-3.5_2.12 jar."
        )
    jar = Path(next(iter(spec.submodule_search_locations))) / "jars" / ICEBERG_JAR_NAME
    if not jar.is_file():
        raise FileNotFoundError(f"{jar} is missing from the installed {ICEBERG_JAR_PACKAGE} package")
    return jar


def defaults(target: str = "local") -> dict[str, str]:
    """Path defaults. The two targets never share a warehouse folder: `make demo` on the embedded
    target starts by deleting its own, and the same table would have a location in each catalog."""
    warehouse = PROJECT_ROOT / "data" / ("cluster/warehouse" if target == "cluster" else "warehouse")
    return {
        "DBT_PROFILES_DIR": str(PROJECT_ROOT / "profiles"),
        "CDC_LANDING_ROOT": str(PROJECT_ROOT / "data" / "landing"),
        "CDC_WAREHOUSE": str(warehouse),
    }


def apply_defaults(environ: os._Environ[str] | dict[str, str] = os.environ) -> None:
    """Fill in unset variables and make path variables absolute. Never raises."""
    for name, value in defaults(environ.get("CDC_TARGET") or "local").items():
        current = environ.get(name) or value
        environ[name] = os.path.abspath(current)
    if not environ.get("ICEBERG_SPARK_RUNTIME_JAR"):
        try:
            environ["ICEBERG_SPARK_RUNTIME_JAR"] = str(find_iceberg_jar())
        except FileNotFoundError:
            pass  # the profile then fails with a message naming the variable


def startup() -> None:
    """What the venv's start-up hook runs in every Python process: the defaults above, and the
    one-process-at-a-time guard of the embedded warehouse (python_hooks/embedded_lock.py)."""
    apply_defaults()
    from python_hooks import embedded_lock

    embedded_lock.install()


def write_pth() -> Path:
    """Install the start-up hook into the running interpreter's site-packages (the venv)."""
    site_packages = Path(sysconfig.get_paths()["purelib"])
    pth = site_packages / PTH_NAME
    pth.write_text(
        f"{PROJECT_ROOT}\nimport python_hooks.env as _cdc_env; _cdc_env.startup()\n",
        encoding="utf-8",
    )
    return pth
