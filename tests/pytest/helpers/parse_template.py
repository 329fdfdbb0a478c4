"""One full dbt parse per pytest run instead of one per schema (docs/tests.md, "Paying once for what is expensive").

Every test works in a schema of its own (CDC_SCHEMA) with a landing folder of its own (CDC_LANDING_ROOT), each with
its own dbt target folder. dbt cannot partially parse across them: the schema is in the profile's hash, so a new
schema, and each target folder a test's process makes, costs a full parse (about 5 s of one core). The project's
parse depends on the two only as text: the schema in the nodes' names and relations, the landing folder in the
sources' identifiers and in dbt's record of the environment variables it read. So the run parses the project once
for a made-up schema and landing folder, and gives each new target folder that parse's `partial_parse.msgpack` with
the two swapped and the profile's hash computed for the new schema. dbt's own partial parsing then checks everything
else as it always does (every file's checksum, the variables, dbt_project.yml, the environment variables each file
read) and re-parses what differs. tests/pytest/unit/test_parse_template.py proves the manifest equals a full parse.

Only for the default project on the local target; anything else gets dbt's full parse as before. The run's
template is `TEMPLATE` (set by conftest.py's session fixture `parse_template_of_the_run`): the `dbt` fixture seeds each
schema's folder, and a test that runs the project's commands as processes seeds their target folder with `seed`."""

from __future__ import annotations

import pprint
from collections.abc import Callable
from pathlib import Path

import msgpack

from bench.harness import environment
from helpers.paths import PROJECT

SAVED = "partial_parse.msgpack"
SCHEMA = "t_parse_template"  # never one of the tests' schemas (t_ + 10 hex digits, or a module's own name)


def profile_hash(schema: str) -> str:
    """dbt's `state_check.profile_hash` of the local target's profile with `schema` (dbt.parser.manifest:
    build_manifest_state_check hashes the credentials' connection keys; profiles/profiles.yml's local output)."""
    from dbt.adapters.spark.connections import SparkCredentials
    from dbt.artifacts.resources.base import FileHash

    credentials = SparkCredentials.from_dict({"method": "session", "host": "localhost", "schema": schema})
    return FileHash.from_contents(pprint.pformat(sorted(credentials.connection_info()))).checksum


def vars_hash(target_arg: str | None) -> str:
    """dbt's `state_check.vars_hash` of a command with no --vars and no --profile, and `--target target_arg`
    (or none): the target named on the command line, not the one the profile chose, is in it."""
    from dbt.artifacts.resources.base import FileHash
    from dbt.version import __version__

    return FileHash.from_contents("\x00".join([pprint.pformat({}), "", target_arg or "", __version__])).checksum


def _swap(value, pairs: list[tuple[str, str]]):
    if isinstance(value, str):
        for old, new in pairs:
            value = value.replace(old, new)
        return value
    if isinstance(value, dict):
        return {_swap(k, pairs): _swap(v, pairs) for k, v in value.items()}
    if isinstance(value, list):
        return [_swap(v, pairs) for v in value]
    return value


class ParseTemplate:
    """The run's one parse, made on first use by `parse(schema, landing, target_path)` (a dbt parse in this
    process), then copied into each new schema's target folder."""

    def __init__(self, folder: Path, parse: Callable[[str, Path, Path], bool]) -> None:
        self._folder = folder
        self._parse = parse
        self._saved: dict | None = None
        self._failed = False

    @property
    def landing(self) -> Path:
        return self._folder / "landing"

    def _load(self) -> dict | None:
        if self._saved is None and not self._failed:
            self.landing.mkdir(parents=True, exist_ok=True)
            target = self._folder / "target"
            parsed = self._parse(SCHEMA, self.landing, target)
            saved = msgpack.unpackb((target / SAVED).read_bytes(), raw=False, strict_map_key=False) if parsed else None
            # A profile this module does not know how to hash: every schema gets dbt's own full parse.
            state = saved["state_check"] if saved else None
            if state is None or (state["profile_hash"]["checksum"], state["vars_hash"]["checksum"]) != (
                profile_hash(SCHEMA),
                vars_hash("local"),
            ):
                self._failed = True
            else:
                self._saved = saved
        return self._saved

    def seed(self, target_path: Path, schema: str, landing: Path | str, target_arg: str | None = "local") -> None:
        """Give `target_path` the run's parse for `schema` and `landing` (CDC_LANDING_ROOT), for dbt commands
        given `--target target_arg` (None: a command that names no target, as the project's own commands
        run them), unless dbt already saved one there."""
        if (target_path / SAVED).exists() or schema == SCHEMA:
            return
        saved = self._load()
        if saved is None:
            return
        swapped = _swap(saved, [(SCHEMA, schema), (str(self.landing), str(landing))])
        swapped["state_check"]["profile_hash"]["checksum"] = profile_hash(schema)
        swapped["state_check"]["vars_hash"]["checksum"] = vars_hash(target_arg)
        target_path.mkdir(parents=True, exist_ok=True)
        (target_path / SAVED).write_bytes(msgpack.packb(swapped, use_bin_type=True))


TEMPLATE: ParseTemplate | None = None


def seed(target_path: Path, schema: str, landing: Path | str, target_arg: str | None = "local") -> None:
    """ParseTemplate.seed with the run's template, when the run has one (tests/pytest/conftest.py)."""
    if TEMPLATE is not None:
        TEMPLATE.seed(target_path, schema, landing, target_arg)


def parse(schema: str, landing: Path, target: Path, target_arg: str | None = "local") -> bool:
    """`dbt parse` of the project in this process (no Spark) for `schema` and `landing`, into `target`, with
    `--target target_arg` (None: none); os.environ's CDC_SCHEMA and CDC_LANDING_ROOT as they were afterwards."""
    from dbt.cli.main import dbtRunner

    paths = ["--project-dir", str(PROJECT), "--target-path", str(target), "--log-path", str(target / "logs")]
    named = ["--target", target_arg] if target_arg else []
    with environment(CDC_SCHEMA=schema, CDC_LANDING_ROOT=str(landing)):
        return dbtRunner().invoke(["parse", "--quiet", *paths, *named]).success
