"""Slim CI selects exactly what a pull request changed and everything downstream of it.

The CI job (.github/workflows/ci.yml, `slim-ci`) runs
`dbt build --select state:modified+ --defer --state <production manifest dir>`. Here, on a temporary
copy of the project: the manifest of the unedited copy plays production, one model is edited, and
`dbt ls --select state:modified+ --state <that manifest>` must list the edited model and its
descendants (computed independently from the production manifest's child map), nothing else.
No warehouse is needed: dbt ls only parses."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from helpers.paths import PROJECT

EDITED = "model.cdc_lakehouse.crm__customer_master"
EDITED_FILE = "models/current_state/crm/crm__customer_master.sql"
# What `dbt build` would run, and the exposures it reports on.
BUILT_TYPES = {"model", "snapshot", "seed", "exposure"}
COPIED = ["dbt_project.yml", "models", "macros", "snapshots", "seeds", "tests", "analyses"]


@pytest.fixture(scope="module")
def runner(warehouse):
    from dbt.cli.main import dbtRunner

    return dbtRunner()


@pytest.fixture(scope="module")
def project_copy(tmp_path_factory) -> Path:
    copy = tmp_path_factory.mktemp("slim_ci") / "project"
    copy.mkdir()
    for name in COPIED:
        source = PROJECT / name
        if source.is_dir():
            shutil.copytree(source, copy / name, ignore=shutil.ignore_patterns("pytest", "__pycache__"))
        elif source.is_file():
            shutil.copy2(source, copy / name)
    return copy


def dbt(runner, monkeypatch, project: Path, target: Path, *args: str, landing: str):
    # Source identifiers are rendered from CDC_LANDING_ROOT, so it is part of the compared state.
    monkeypatch.setenv("CDC_LANDING_ROOT", landing)
    monkeypatch.setenv("CDC_SCHEMA", "slim_ci")
    result = runner.invoke(
        [*args, "--project-dir", str(project), "--target-path", str(target), "--log-path", str(target / "logs")]
    )
    assert result.success, result.exception
    return result


def listed(result) -> set[str]:
    """unique_ids of `dbt ls --output json --output-keys unique_id resource_type`, built types only."""
    rows = [json.loads(line) for line in result.result]
    return {row["unique_id"] for row in rows if row["resource_type"] in BUILT_TYPES}


def descendants(manifest: dict, unique_id: str) -> set[str]:
    seen, stack = set(), [unique_id]
    while stack:
        for child in manifest["child_map"].get(stack.pop(), []):
            if child not in seen:
                seen.add(child)
                stack.append(child)
    return seen


@pytest.fixture(scope="module")
def production_state(runner, project_copy, tmp_path_factory):
    """The unedited copy's manifest (what the slim-CI job downloads from the last main run)."""
    monkeypatch = pytest.MonkeyPatch()
    state = tmp_path_factory.mktemp("production_state")
    dbt(runner, monkeypatch, project_copy, state, "parse", landing="/landing/production")
    monkeypatch.undo()
    return state


@pytest.fixture(scope="module")
def pr_target(tmp_path_factory) -> Path:
    """One target for every `dbt ls` of the pull request's copy: partial parsing keeps them quick."""
    return tmp_path_factory.mktemp("pr_target")


LS = ("ls", "--select", "state:modified+", "--output", "json", "--output-keys", "unique_id", "resource_type")


def test_unedited_copy_selects_nothing(runner, monkeypatch, project_copy, production_state, pr_target):
    result = dbt(
        runner,
        monkeypatch,
        project_copy,
        pr_target,
        *LS,
        "--state",
        str(production_state),
        landing="/landing/production",
    )
    assert listed(result) == set()


def test_edited_model_selects_itself_and_its_descendants(
    runner, monkeypatch, project_copy, production_state, pr_target
):
    manifest = json.loads((production_state / "manifest.json").read_text())
    expected = {
        unique_id for unique_id in {EDITED} | descendants(manifest, EDITED) if unique_id.split(".")[0] in BUILT_TYPES
    }
    edited = project_copy / EDITED_FILE
    original = edited.read_text()
    edited.write_text(original.rstrip("\n") + "\n-- an edit in a pull request\n")
    try:
        result = dbt(
            runner,
            monkeypatch,
            project_copy,
            pr_target,
            *LS,
            "--state",
            str(production_state),
            landing="/landing/production",
        )
    finally:
        edited.write_text(original)
    selected = listed(result)
    assert selected == expected
    # Slim: upstream and unrelated models are deferred to production, not rebuilt.
    assert "model.cdc_lakehouse.stg_crm__customer_master" not in selected
    assert "model.cdc_lakehouse.salesdb__sales_order" not in selected
    assert len(selected) < len([n for n in manifest["nodes"] if n.split(".")[0] in BUILT_TYPES])


def test_landing_root_must_match_production(runner, monkeypatch, project_copy, production_state, pr_target):
    """Why the slim-CI job parses with production's CDC_LANDING_ROOT: source identifiers are rendered
    from it, so another value marks every source, and so every model, as modified."""
    result = dbt(
        runner,
        monkeypatch,
        project_copy,
        pr_target,
        *LS,
        "--state",
        str(production_state),
        landing="/landing/somewhere-else",
    )
    manifest = json.loads((production_state / "manifest.json").read_text())
    # the raw sources (their identifier is a folder under the landing root), not the pipeline's own cdc_meta
    raw = {n for n, source in manifest["sources"].items() if source["source_meta"].get("cdc_producer")}
    assert raw and raw <= {json.loads(line)["unique_id"] for line in result.result}
    assert EDITED in listed(result)
