"""The pytest run's one parse (helpers/parse_template.py), swapped into a schema's target folder, gives dbt
the manifest a full parse of that schema gives, and dbt re-parses no file for it. No Spark: `dbt parse` only."""

from __future__ import annotations

import json
from pathlib import Path

from helpers.parse_template import ParseTemplate, parse

# What differs between two parses of the same project whatever they are given: when and by which invocation.
PER_INVOCATION = {"created_at", "generated_at", "invocation_id", "invocation_started_at", "run_started_at"}


def _manifest(target: Path):
    def without_clock(value):
        if isinstance(value, dict):
            return {k: without_clock(v) for k, v in value.items() if k not in PER_INVOCATION}
        if isinstance(value, list):
            return [without_clock(v) for v in value]
        return value

    return without_clock(json.loads((target / "manifest.json").read_text(encoding="utf-8")))


def test_a_seeded_schema_parses_nothing_and_gets_a_full_parse_s_manifest(tmp_path) -> None:
    template = ParseTemplate(tmp_path / "template", parse)
    schema, landing = "t_0123456789", tmp_path / "landing"
    seeded, full = tmp_path / "seeded", tmp_path / "full"

    template.seed(seeded, schema, landing)
    assert parse(schema, landing, seeded)
    perf = json.loads((seeded / "perf_info.json").read_text(encoding="utf-8"))
    assert perf["path_count"] > 100 and perf["parsed_path_count"] == 0, perf  # dbt kept the seeded parse whole

    assert parse(schema, landing, full)  # no partial_parse.msgpack there: dbt's full parse
    assert json.loads((full / "perf_info.json").read_text(encoding="utf-8"))["parsed_path_count"] > 100
    seeded_manifest, full_manifest = _manifest(seeded), _manifest(full)
    assert schema in json.dumps(full_manifest["sources"]) and str(landing) in json.dumps(full_manifest["sources"])
    assert seeded_manifest == full_manifest

    # a command that names no target (the project's own commands as processes) gets the same parse
    unnamed = tmp_path / "unnamed"
    template.seed(unnamed, schema, landing, target_arg=None)
    assert parse(schema, landing, unnamed, target_arg=None)
    assert json.loads((unnamed / "perf_info.json").read_text(encoding="utf-8"))["parsed_path_count"] == 0
    assert _manifest(unnamed) == full_manifest


def test_a_folder_dbt_already_parsed_is_left_as_it_is(tmp_path) -> None:
    calls = []
    template = ParseTemplate(tmp_path / "template", lambda *args: calls.append(args) or False)
    (tmp_path / "target").mkdir()
    (tmp_path / "target" / "partial_parse.msgpack").write_bytes(b"dbt's own")
    template.seed(tmp_path / "target", "t_0123456789", tmp_path / "landing")
    assert (tmp_path / "target" / "partial_parse.msgpack").read_bytes() == b"dbt's own" and not calls
    template.seed(tmp_path / "other", "t_0123456789", tmp_path / "landing")  # the template's parse failed
    assert len(calls) == 1 and not (tmp_path / "other").exists()
