"""A runner's later parses (a loop's runs, python_hooks/project/session.py: parse) write target/manifest.json only
when the project changed since the manifest it last wrote: the file stays that manifest while nothing changed, and
follows a change. No Spark: `dbt parse` only."""

from __future__ import annotations

import json

from helpers.paths import PROJECT
from python_hooks.project.session import dbt_runner, parse


def test_the_manifest_is_written_again_only_when_the_project_changed(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("CDC_SCHEMA", "first_schema")
    target = tmp_path / "target"
    args = ["--project-dir", str(PROJECT), "--target-path", str(target)]
    runner = dbt_runner()
    written = target / "manifest.json"

    first = parse(runner, args)
    stamp = written.stat().st_mtime_ns
    again = parse(runner, args)
    assert written.stat().st_mtime_ns == stamp  # not written again
    assert sorted(again.nodes) == sorted(first.nodes)
    assert {n.schema for n in again.nodes.values() if n.resource_type == "model"} == {
        n.schema for n in first.nodes.values() if n.resource_type == "model"
    }

    monkeypatch.setenv("CDC_SCHEMA", "second_schema")  # the profile's schema: every model's schema changes
    changed = parse(runner, args)
    schemas = {n.schema for n in changed.nodes.values() if n.resource_type == "model"}
    assert schemas and all(s.startswith("second_schema") for s in schemas), schemas
    on_disk = json.loads(written.read_text(encoding="utf-8"))
    assert {n["schema"] for n in on_disk["nodes"].values() if n["resource_type"] == "model"} == schemas
