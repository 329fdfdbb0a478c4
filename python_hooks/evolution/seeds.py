"""The seeds `make run` need not load again.

`dbt build` drops a seed's table, writes it again and runs the seed's tests at every run: for a code list
that changes once a month, a drop, a create, an insert, a commit and a query per test at every scheduled
run. So `make run` (embedded target: one writer) keeps the fingerprint of each seed it loaded and whose
own tests passed, in `$CDC_WAREHOUSE/_python_hooks/seeds.json`: the CSV's checksum (dbt's sha256 of the
file), the seed's config and relation, the project's macros and dbt's version. When it is unchanged, dbt
is told (CDC_SEEDS_UNCHANGED): the seed's materialization (macros/spark/seed.sql) leaves its table as it is
(and loads it if it is missing), and the seed's own tests (every parent an unchanged seed) are left out. A
test that also reads a model (a mart's `relationships` test to the seed) runs as before.

Anything else loads as before: `dbt seed` or `dbt build` by hand, `--full-refresh`, the cluster target, a
changed CSV, config or macro, a seed whose tests did not pass, and a CSV over 1 MiB (dbt records its path,
not its checksum).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from pathlib import Path

from python_hooks.evolution.staging_views import fingerprint, project_code
from python_hooks.project.tables import tests_reading_only
from python_hooks.project.warehouse import write_state

log = logging.getLogger(__name__)

UNCHANGED_VARIABLE = "CDC_SEEDS_UNCHANGED"  # read by macros/spark/seed.sql: cdc_seed_unchanged
STATE_FILE = "seeds.json"


def fingerprints(manifest) -> dict[str, tuple[str, str, str]]:
    """seed name -> (schema, identifier, fingerprint) for every seed whose CSV dbt checksummed."""
    code = None
    found = {}
    for node in manifest.nodes.values():
        checksum = getattr(node, "checksum", None)
        if node.resource_type != "seed" or checksum is None or checksum.name != "sha256":
            continue
        code = code or project_code(manifest)
        # what a staging view's fingerprint is made of, the CSV's checksum in place of the raw files' schema
        found[node.name] = (node.schema, node.alias or node.name, fingerprint(node, checksum.checksum, code, ""))
    return found


def unchanged(state_dir: Path, found: Mapping[str, tuple[str, str, str]]) -> set[str]:
    """The seeds of `found` loaded from the same fingerprint by an earlier run, their tests passed. Whether
    the table still exists is the materialization's to see (it loads a missing one)."""
    return SeedState(state_dir).unchanged(found)


def own_tests(manifest, seeds: set[str]) -> dict[str, str]:
    """test unique_id -> test name, for the data tests that read only seeds among `seeds`."""
    ids = {uid for uid, node in manifest.nodes.items() if node.resource_type == "seed" and node.name in seeds}
    return tests_reading_only(manifest, ids)


def record(state_dir: Path, manifest, found: Mapping[str, tuple[str, str, str]], result) -> None:
    """After the build: remember the seeds it loaded (or left) whose own tests that ran all passed; forget
    a seed that failed or whose test did not pass. A seed the build did not run stays as recorded."""
    statuses = {r.node.unique_id: str(r.status) for r in getattr(result.result, "results", None) or [] if r.node}
    seed_ids = {node.name: uid for uid, node in manifest.nodes.items() if node.resource_type == "seed"}
    built, failed = {}, []
    for name, seed in found.items():
        status = statuses.get(seed_ids.get(name, ""))
        if status is None:
            continue
        tests = [statuses[uid] for uid in own_tests(manifest, {name}) if uid in statuses]
        if status == "success" and all(test == "pass" for test in tests):
            built[name] = seed
        else:
            failed.append(name)
    if built or failed:
        SeedState(state_dir).record(built, failed)


class SeedState:
    """The fingerprints of the seeds `make run` loaded, in the hooks' state folder."""

    def __init__(self, state_dir: Path) -> None:
        self.path = Path(state_dir) / STATE_FILE
        self.seeds: dict[str, dict[str, str]] = self._load()

    def _load(self) -> dict[str, dict[str, str]]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as error:  # only an optimisation: every seed is loaded again
            log.warning("%s is unreadable (%s): every seed it records is loaded again", self.path, error)
            return {}
        if not isinstance(data, dict):
            return {}
        return {
            str(k): {"relation": str(v.get("relation")), "fingerprint": str(v.get("fingerprint"))}
            for k, v in data.items()
            if isinstance(v, dict)
        }

    def unchanged(self, found: Mapping[str, tuple[str, str, str]]) -> set[str]:
        """The seeds (name -> (schema, identifier, fingerprint), `fingerprints`) loaded from the same fingerprint."""
        return {
            name
            for name, (schema, identifier, print_) in found.items()
            if self.seeds.get(name) == {"relation": f"{schema}.{identifier}", "fingerprint": print_}
        }

    def record(self, built: Mapping[str, tuple[str, str, str]], failed: Iterable[str] = ()) -> None:
        """Remember the seeds dbt loaded (or kept) this run; forget those that failed."""
        for name, (schema, identifier, print_) in built.items():
            self.seeds[name] = {"relation": f"{schema}.{identifier}", "fingerprint": print_}
        for name in failed:
            self.seeds.pop(name, None)
        write_state(self.path, json.dumps(self.seeds, indent=1, sort_keys=True))
