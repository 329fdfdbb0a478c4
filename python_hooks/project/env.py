"""Runtime environment for dbt and the hooks: paths, the jars Spark loads, the dbt profile.

The dbt profile (profiles/profiles.yml) reads everything machine-specific from environment
variables. This module gives each one a default, so that `dbt run` works in the project's venv
with nothing exported:

    DBT_PROFILES_DIR           <project>/profiles
    CDC_TARGET                 local                        (dbt target: local | cluster)
    CDC_LANDING_ROOT           <project>/data/landing       (raw change files)
    CDC_WAREHOUSE              <project>/data/warehouse     (Iceberg tables + Derby metastore)
                               <project>/data/cluster/warehouse  when CDC_TARGET=cluster (the
                               cluster's tables, its metastore is in PostgreSQL); or an
                               s3a://<bucket>/<prefix> (docs/storage.md)
    CDC_STATE_DIR              this machine's folder of the warehouse: the embedded target's Derby
                               metastore, the one-process lock and the hooks' state. The warehouse
                               itself when it is a local folder; for one on S3,
                               <project>/data/state/<scheme>/<bucket>/<prefix>
    ICEBERG_SPARK_RUNTIME_JAR  <project>/jars/lib/iceberg-spark-runtime-3.5_2.12-<version>.jar
    CDC_AWS_JARS               the other jars of jars/lib/, comma-separated: iceberg-aws-bundle
                               (S3FileIO), hadoop-aws and aws-java-sdk-bundle (s3a:// paths)
    CDC_JVM_OPTIONS            more options of the embedded driver JVM: by default, when `make install`
                               made the class archive (python_hooks/project/jvm_classes.py), the ones
                               that map it; unset without it

The jars are the ones jars/pom.xml pins (`make install` copies them from Maven Central into
jars/lib/); this module reads the pom for their file names, so a version changes in one place.

Values the user set win; relative paths are made absolute (Spark resolves a relative table
location against the warehouse, not the working directory); a URI (s3a://, file:) stays as written.
When the landing root or the warehouse is on S3 and no endpoint is set (AWS_ENDPOINT_URL_S3,
AWS_ENDPOINT_URL), the variables of the local server that `make s3-up` runs are filled in as defaults
(its endpoint and region, and its development keys when it runs with them and no key is set): unset
when it does not run, which means AWS itself. `make` installs a `.pth` file into
the venv (`python -m python_hooks write-pth`) that calls `apply_defaults()` at interpreter
start-up (`startup()`), which is how a plain `dbt` in the activated venv sees them.

Since the defaults are written into the environment, `apply_defaults()` also records which names it
filled in, in CDC_DEFAULTED (comma-separated, inherited by subprocesses and dbt): `describe()` and
`banner()` tell a value you set ("environment") from one of these defaults ("default"). A value
you set that was only made absolute counts as yours. `python -m python_hooks env` prints the table,
and every `python -m python_hooks <command>` and the dbt commands that touch the warehouse
(`dbt run`, `build`, `test`, `show`, ...: `startup()`) print `banner()` first, on stderr.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import re
import sys
import sysconfig
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from pathlib import Path

from python_hooks.project import embedded_lock, jvm_classes, object_store
from python_hooks.project.dbt_args import target_of
from python_hooks.project.paths import PROJECT_ROOT

JARS_POM = PROJECT_ROOT / "jars" / "pom.xml"
JARS_DIR = PROJECT_ROOT / "jars" / "lib"
# Variable -> the artifacts of jars/pom.xml it names (the profile's spark.jars joins the variables).
JAR_VARIABLES = {
    "ICEBERG_SPARK_RUNTIME_JAR": ("iceberg-spark-runtime-3.5_2.12",),
    "CDC_AWS_JARS": ("iceberg-aws-bundle", "hadoop-aws", "aws-java-sdk-bundle"),
}
PTH_NAME = "cdc_lakehouse.pth"
DEFAULTED = "CDC_DEFAULTED"  # the names apply_defaults() filled in, comma-separated
SECRET = "CDC_ERASURE_SECRET"  # shown as set or not, never its value
JVM_OPTIONS = "CDC_JVM_OPTIONS"  # the embedded driver's extra JVM options (the profile's extraJavaOptions)
# Defaults that live in profiles/profiles.yml (env_var(name, default)), never written to the environment.
PROFILE_DEFAULTS = {"CDC_TARGET": "local", "CDC_SCHEMA": "lakehouse"}
# The variables `describe()` reports, in this order.
VARIABLES = [
    "DBT_PROFILES_DIR",
    "CDC_TARGET",
    "CDC_LANDING_ROOT",
    "CDC_WAREHOUSE",
    "CDC_STATE_DIR",
    "CDC_SCHEMA",
    "ICEBERG_SPARK_RUNTIME_JAR",
    "CDC_AWS_JARS",
    JVM_OPTIONS,
    SECRET,
]
# dbt commands that open the warehouse or read the landing zone: a plain `dbt <command>` in the venv
# prints the banner first (startup()); not --version, --help, parse, deps, ls, init, clean.
DBT_WAREHOUSE_COMMANDS = frozenset(
    ["run", "build", "test", "show", "seed", "snapshot", "source", "docs", "compile", "run-operation", "retry", "clone"]
)


@functools.cache
def pinned_jars(pom: Path = JARS_POM) -> dict[str, str]:
    """artifactId -> the file name `mvn dependency:copy-dependencies` gives it (artifactId-version.jar),
    for every dependency of jars/pom.xml, its ${properties} filled in."""
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    root = ElementTree.parse(pom).getroot()
    properties = {element.tag.split("}")[-1]: element.text or "" for element in root.iterfind("m:properties/*", ns)}
    jars = {}
    for dependency in root.iterfind("m:dependencies/m:dependency", ns):
        artifact = dependency.findtext("m:artifactId", "", ns)
        version = re.sub(r"\$\{([^}]+)\}", lambda m: properties[m.group(1)], dependency.findtext("m:version", "", ns))
        jars[artifact] = f"{artifact}-{version}.jar"
    return jars


def default_jars(name: str) -> str:
    """The default of a JAR_VARIABLES variable: its jars in jars/lib/, comma-separated. Raises
    FileNotFoundError, in one line that says to run `make install`, when one is missing."""
    try:
        pinned = pinned_jars()
    except (OSError, SyntaxError, KeyError) as error:  # SyntaxError: ElementTree's ParseError
        raise FileNotFoundError(f"{JARS_POM} is not readable ({error}): see `git status`") from error
    jars = [JARS_DIR / pinned[artifact] for artifact in JAR_VARIABLES[name]]
    missing = [jar.name for jar in jars if not jar.is_file()]
    if missing:
        where = "is missing" if not JARS_DIR.is_dir() else f"lacks {', '.join(missing)}"
        raise FileNotFoundError(f"{JARS_DIR} {where}: run `make install` (it copies the jars of jars/pom.xml)")
    return ",".join(str(jar) for jar in jars)


def spark_jars(environ: Mapping[str, str] = os.environ) -> list[Path]:
    """Every jar Spark needs, the Iceberg runtime first: each JAR_VARIABLES variable's value (yours
    wins), else its default. Raises FileNotFoundError (see default_jars)."""
    jars = []
    for name in JAR_VARIABLES:
        value = environ.get(name) or default_jars(name)
        jars += [Path(jar).resolve() for jar in value.split(",") if jar]
    return jars


def jars_problem(environ: Mapping[str, str] = os.environ) -> str | None:
    """Why Spark would start without its jars (one line), or None."""
    try:
        spark_jars(environ)
    except FileNotFoundError as error:
        return str(error)
    return None


def defaults(target: str = "local") -> dict[str, str]:
    """Path defaults. The two targets never share a warehouse folder: `make demo` on the embedded
    target starts by deleting its own, and the same table would have a location in each catalog."""
    warehouse = PROJECT_ROOT / "data" / ("cluster/warehouse" if target == "cluster" else "warehouse")
    return {
        "DBT_PROFILES_DIR": str(PROJECT_ROOT / "profiles"),
        "CDC_LANDING_ROOT": str(PROJECT_ROOT / "data" / "landing"),
        "CDC_WAREHOUSE": str(warehouse),
    }


def _defaulted(environ: Mapping[str, str]) -> list[str]:
    return [name for name in (environ.get(DEFAULTED) or "").split(",") if name]


def _default_values(name: str) -> set[str]:
    """Every value apply_defaults() may have written for `name` (the path defaults of both targets)."""
    if name in JAR_VARIABLES:
        try:
            return {default_jars(name)}
        except FileNotFoundError:
            return set()
    if name == JVM_OPTIONS:
        return {jvm_classes.mapping_options()}  # also once the archive is gone: the default goes with it
    return {os.path.abspath(defaults(target)[name]) for target in ("local", "cluster") if name in defaults(target)}


_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def is_uri(value: str) -> bool:
    """A location with a scheme (s3a://bucket/x, file:/x), not a path on this machine."""
    return bool(_SCHEME.match(value))


def _absolute(value: str) -> str:
    """A path made absolute; a URI as written."""
    return value if is_uri(value) else os.path.abspath(value)


def state_dir_for(warehouse: str) -> str:
    """CDC_STATE_DIR's default: the warehouse when it is a folder here (a `file:` URI's path too),
    else <project>/data/state/<scheme>/<bucket>/<prefix> (Derby and the hooks' state need a local disk)."""
    if not is_uri(warehouse):
        return os.path.abspath(warehouse)
    scheme, rest = warehouse.split(":", 1)
    if scheme == "file":
        return os.path.abspath("/" + rest.lstrip("/"))
    inside = [part for part in rest.split("/") if part not in ("", ".", "..")]
    return (
        str(PROJECT_ROOT / "data" / "state" / scheme / Path(*inside))
        if inside
        else str(PROJECT_ROOT / "data" / "state" / scheme)
    )


def local_state_dir(environ: Mapping[str, str] = os.environ) -> str:
    """CDC_STATE_DIR as you set it, else its default for the warehouse set now (state_dir_for)."""
    value = environ.get("CDC_STATE_DIR")
    if value and not _was_filled("CDC_STATE_DIR", environ):
        return os.path.abspath(value)
    return state_dir_for(environ.get("CDC_WAREHOUSE") or defaults(_target(environ))["CDC_WAREHOUSE"])


def _s3_defaults(environ: Mapping[str, str]) -> dict[str, str]:
    """The standard AWS variables of the running local server (`make s3-up`), when the landing root or
    the warehouse is on S3 and no endpoint is set; {} otherwise (AWS itself)."""
    on_s3 = any(
        str(environ.get(name, "")).startswith(("s3a://", "s3://")) for name in ("CDC_LANDING_ROOT", "CDC_WAREHOUSE")
    )
    if not on_s3 or environ.get("AWS_ENDPOINT_URL_S3") or environ.get("AWS_ENDPOINT_URL"):
        return {}
    return dict(object_store.shell_variables(environ))


# The standard AWS variables apply_defaults() may fill in from the running local server.
S3_VARIABLES = ("AWS_ENDPOINT_URL_S3", "AWS_REGION", "CDC_S3_BUCKET", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")


DERIVED = "CDC_DERIVED"  # name:fingerprint of each derived default apply_defaults() wrote (never a value)


def _fingerprint(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()[:12]


def _was_filled(name: str, environ: Mapping[str, str]) -> bool:
    """A derived default (CDC_STATE_DIR, the local server's AWS variables) that apply_defaults() wrote,
    here or in a parent process, and nobody changed since: decided again from the values now. A value
    a caller set over it (a test's, a script's) has another fingerprint, and is theirs. Decided by the
    fingerprint alone: a caller that copies the environment without CDC_DEFAULTED (a test's child) still
    passes on a derived value, not one of its own (a copied state folder that follows no warehouse)."""
    recorded = dict(item.split(":", 1) for item in (environ.get(DERIVED) or "").split(",") if ":" in item)
    value = environ.get(name)
    return value is not None and recorded.get(name) == _fingerprint(value)


def _is_default(name: str, environ: Mapping[str, str]) -> bool:
    """Filled in by apply_defaults() (here or in a parent process) and not changed since."""
    if name == "CDC_STATE_DIR" or name in S3_VARIABLES:
        return _was_filled(name, environ)
    return name in _defaulted(environ) and environ.get(name) in _default_values(name)


def apply_defaults(environ: MutableMapping[str, str] = os.environ) -> None:
    """Fill in unset variables, make path variables absolute, and record in CDC_DEFAULTED which
    names were filled in. Safe to call again (the venv's start-up hook, then a command): a name
    filled in before stays a default, and follows CDC_TARGET (a parent's local warehouse default is
    not a cluster child's); a value set since is the user's. Never raises."""
    filled = []
    for name, value in defaults(environ.get("CDC_TARGET") or "local").items():
        if not environ.get(name) or _is_default(name, environ):
            environ[name] = os.path.abspath(value)
            filled.append(name)
        else:
            environ[name] = _absolute(environ[name])
    if not environ.get("CDC_STATE_DIR") or _was_filled("CDC_STATE_DIR", environ):
        filled.append("CDC_STATE_DIR")
        environ["CDC_STATE_DIR"] = state_dir_for(environ["CDC_WAREHOUSE"])
    else:
        environ["CDC_STATE_DIR"] = os.path.abspath(environ["CDC_STATE_DIR"])
    for name in S3_VARIABLES:
        if name in environ and _was_filled(name, environ):
            environ.pop(name)  # a parent's default: the child decides again (its landing, its warehouse)
    for name, value in _s3_defaults(environ).items():
        if not environ.get(name):
            environ[name] = value
            filled.append(name)
    for name in JAR_VARIABLES:
        if not environ.get(name) or _is_default(name, environ):
            environ.pop(name, None)
            try:
                environ[name] = default_jars(name)
                filled.append(name)
            except FileNotFoundError:
                pass  # banner() says to run `make install`; the profile names the variable
    if not environ.get(JVM_OPTIONS) or _is_default(JVM_OPTIONS, environ):
        environ.pop(JVM_OPTIONS, None)
        options = jvm_classes.use_options()
        if options:
            environ[JVM_OPTIONS] = options
            filled.append(JVM_OPTIONS)
    if filled:
        environ[DEFAULTED] = ",".join(filled)
    else:
        environ.pop(DEFAULTED, None)
    derived = [name for name in ("CDC_STATE_DIR", *S3_VARIABLES) if name in filled]
    if derived:
        environ[DERIVED] = ",".join(f"{name}:{_fingerprint(environ[name])}" for name in derived)
    else:
        environ.pop(DERIVED, None)


@contextlib.contextmanager
def overridden(values: Mapping[str, str], clear: Sequence[str] = ()) -> Iterator[None]:
    """os.environ with `values` set and the other names of `clear` unset, as it was afterwards."""
    names = {*values, *clear}
    given = {name: os.environ.pop(name) for name in names if name in os.environ}
    os.environ.update(values)
    try:
        yield
    finally:
        for name in names:
            os.environ.pop(name, None)
        os.environ.update(given)


def describe(environ: Mapping[str, str] = os.environ) -> list[tuple[str, str, str]]:
    """(name, value, source) of every variable the project uses; source is "environment" (set by
    the user), "default" (python_hooks/project/env.py's, or the profile's for CDC_TARGET and CDC_SCHEMA)
    or "unset". CDC_ERASURE_SECRET's value is never shown. On the cluster target, also the Thrift
    Server's host and port variables that the profile reads."""
    rows = []
    names = list(VARIABLES)
    if _target(environ) != "local":
        names += [name for name, _ in _thrift_variables(environ)]
    thrift_defaults = dict(_thrift_variables(environ))
    for name in names:
        value = environ.get(name) or ""
        if name == SECRET:
            rows.append((name, "(set, not shown)" if value else "", "environment" if value else "unset"))
        elif value:
            rows.append((name, value, "default" if _is_default(name, environ) else "environment"))
        elif name in PROFILE_DEFAULTS:
            rows.append((name, PROFILE_DEFAULTS[name], "default"))
        elif thrift_defaults.get(name) is not None:
            rows.append((name, thrift_defaults[name], "default"))
        else:
            rows.append((name, "", "unset"))
    return rows


def banner(environ: Mapping[str, str] = os.environ) -> str:
    """One line: the target, where it connects (cluster), the warehouse and landing zone (marked
    "(default)" when env.py chose them) and the schema; on the embedded target, what to do when
    Spark's jars are missing. Never raises."""
    try:
        rows = {name: (value, source) for name, value, source in describe(environ)}

        def path(name: str) -> str:
            value, source = rows[name]
            return f"{value} (default)" if source == "default" else value or "(unset)"

        parts = [f"target {rows['CDC_TARGET'][0]}"]
        thrift = [rows[name][0] for name, _ in _thrift_variables(environ) if name in rows]
        if len(thrift) == 2:
            parts.append(f"thrift {thrift[0]}:{thrift[1]}")
        parts += [
            f"warehouse {path('CDC_WAREHOUSE')}",
            f"landing {path('CDC_LANDING_ROOT')}",
            f"schema {rows['CDC_SCHEMA'][0]}",
        ]
        if is_uri(rows["CDC_WAREHOUSE"][0]):
            parts.append(f"local state {path('CDC_STATE_DIR')}")
        if any(rows[name][0].startswith(("s3a://", "s3://")) for name in ("CDC_WAREHOUSE", "CDC_LANDING_ROOT")):
            endpoint = environ.get("AWS_ENDPOINT_URL_S3") or environ.get("AWS_ENDPOINT_URL")
            local = "AWS_ENDPOINT_URL_S3" in _defaulted(environ)
            parts.append(f"S3 {endpoint} (the local server of make s3-up)" if local else f"S3 {endpoint or 'AWS'}")
        problem = jars_problem(environ) if is_embedded(environ) else None
        return " | ".join(parts + ([problem] if problem else []))
    except Exception as error:  # noqa: BLE001 - a banner never stops a command
        return f"target {environ.get('CDC_TARGET') or 'local'} (environment not readable: {error})"


_ENV_VAR = re.compile(r"""env_var\(\s*['"](\w+)['"]\s*(?:,\s*['"]([^'"]*)['"])?""")


def _target(environ: Mapping[str, str]) -> str:
    return environ.get("CDC_TARGET") or PROFILE_DEFAULTS["CDC_TARGET"]


def is_embedded(environ: Mapping[str, str] = os.environ) -> bool:
    """The target is `local`: Spark runs in this process and reaches the warehouse with its variables."""
    return _target(environ) == "local"


def _thrift_variables(environ: Mapping[str, str]) -> list[tuple[str, str | None]]:
    """[(variable, profile default)] for the host and then the port of the current target's output
    in profiles.yml, when that output connects to a server (not `method: session`) and reads both
    from env_var(); [] otherwise (or if the profile cannot be read)."""
    try:
        import yaml

        folder = Path(environ.get("DBT_PROFILES_DIR") or PROJECT_ROOT / "profiles")
        profiles = yaml.safe_load((folder / "profiles.yml").read_text(encoding="utf-8")) or {}
        output = profiles["cdc_lakehouse"]["outputs"][_target(environ)]
        if output.get("method") == "session":
            return []
        found = [_ENV_VAR.search(str(output.get(key, ""))) for key in ("host", "port")]
        return [(match.group(1), match.group(2)) for match in found if match] if all(found) else []
    except Exception:  # noqa: BLE001 - no profile, another layout: no host or port shown
        return []


def environ_for(args: list[str], environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The environment a command with these arguments runs with: a `--target X` (`-t X`) among
    them is CDC_TARGET=X, with that target's defaults (its warehouse)."""
    result = dict(environ)
    target = target_of(args)
    if target and target != _target(environ):
        result["CDC_TARGET"] = target
        apply_defaults(result)
    return result


_announced = False


def announce(environ: Mapping[str, str] = os.environ, stream=None) -> None:
    """Print banner(environ) once per process, on stderr unless `stream` says otherwise: the first
    line of every `python -m python_hooks` command and of a plain `dbt run` in the venv. A second
    call in the same process (a pipeline, a hook) prints nothing, so the line never repeats."""
    global _announced
    if _announced:
        return
    _announced = True
    print(banner(environ), file=stream or sys.stderr, flush=True)


def _dbt_touches_warehouse(argv: list[str]) -> bool:
    """Is this process the dbt CLI running a command that opens the warehouse (run, build, show, ...)?"""
    if not argv or os.path.basename(argv[0]) != "dbt":
        return False
    arguments = argv[1:]
    if any(a in {"--help", "-h", "--version", "-V", "--quiet", "-q"} for a in arguments):
        return False
    command = next((a for a in arguments if not a.startswith("-")), None)
    return command in DBT_WAREHOUSE_COMMANDS


def startup() -> None:
    """What the venv's start-up hook runs in every Python process: the defaults above, the
    one-process-at-a-time guard of the embedded warehouse (python_hooks/project/embedded_lock.py), and, in
    the dbt CLI only (`dbt run|build|test|show|seed|snapshot|source|docs|compile|run-operation`,
    not --help, --version, --quiet, parse, deps, ls), the banner on stderr before dbt starts."""
    apply_defaults()
    embedded_lock.install()
    try:
        argv = list(getattr(sys, "argv", []))
        if _dbt_touches_warehouse(argv):
            announce(environ_for(argv[1:]))  # a plain `dbt run` in the venv says which warehouse it uses
    except Exception:  # noqa: BLE001, S110 - the start-up hook of every venv Python never fails
        pass


def write_pth() -> Path:
    """Install the start-up hook into the running interpreter's site-packages (the venv)."""
    site_packages = Path(sysconfig.get_paths()["purelib"])
    pth = site_packages / PTH_NAME
    pth.write_text(
        f"{PROJECT_ROOT}\nimport python_hooks.project.env as _cdc_env; _cdc_env.startup()\n",
        encoding="utf-8",
    )
    return pth
