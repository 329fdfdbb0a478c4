"""Which seeds `make run` leaves as it last loaded them, and which tests it then leaves out
(python_hooks/evolution/seeds.py), on a synthetic manifest: no dbt, no Spark."""

from __future__ import annotations

from types import SimpleNamespace

from python_hooks.evolution import seeds


def _seed(name: str = "codes", checksum: str = "abc", kind: str = "sha256", **config):
    return SimpleNamespace(
        name=name,
        unique_id=f"seed.p.{name}",
        resource_type="seed",
        relation_name=f"`s_seeds`.`{name}`",
        raw_code="",
        checksum=SimpleNamespace(name=kind, checksum=checksum),
        config={"column_types": {}, **config},
        schema="s_seeds",
        alias=name,
        depends_on=SimpleNamespace(nodes=[]),
    )


def _test(name: str, *parents: str):
    return SimpleNamespace(
        name=name, unique_id=f"test.p.{name}", resource_type="test", depends_on=SimpleNamespace(nodes=list(parents))
    )


def _manifest(*nodes):
    return SimpleNamespace(nodes={n.unique_id: n for n in nodes}, macros={}, metadata=SimpleNamespace(project_name="p"))


def _result(**statuses):
    return SimpleNamespace(
        result=SimpleNamespace(
            results=[SimpleNamespace(node=SimpleNamespace(unique_id=uid), status=s) for uid, s in statuses.items()]
        )
    )


def test_the_fingerprint_follows_the_csv_and_the_config_and_a_large_csv_has_none():
    base = seeds.fingerprints(_manifest(_seed()))["codes"]
    assert seeds.fingerprints(_manifest(_seed()))["codes"] == base
    assert seeds.fingerprints(_manifest(_seed(checksum="abd")))["codes"] != base  # the CSV changed
    assert seeds.fingerprints(_manifest(_seed(column_types={"a": "int"})))["codes"] != base
    assert seeds.fingerprints(_manifest(_seed(kind="path"))) == {}  # over 1 MiB: dbt checksums the path only


def test_only_tests_that_read_nothing_but_unchanged_seeds_are_left_out():
    manifest = _manifest(
        _seed(),
        _seed("other"),
        _test("codes_unique", "seed.p.codes"),
        _test("mart_to_codes", "model.p.mart", "seed.p.codes"),  # a relationships test from a mart
        _test("other_unique", "seed.p.other"),
    )
    assert seeds.own_tests(manifest, {"codes"}) == {"test.p.codes_unique": "codes_unique"}


def test_a_seed_is_recorded_once_loaded_with_its_tests_passed_and_forgotten_otherwise(tmp_path):
    manifest = _manifest(
        _seed(), _test("codes_unique", "seed.p.codes"), _test("mart_to_codes", "model.p.m", "seed.p.codes")
    )
    found = seeds.fingerprints(manifest)
    assert seeds.unchanged(tmp_path, found) == set()  # never loaded by a run
    seeds.record(tmp_path, manifest, found, _result(**{"seed.p.codes": "success", "test.p.codes_unique": "warn"}))
    assert seeds.unchanged(tmp_path, found) == set(), "a test that did not pass: loaded and tested again"
    seeds.record(
        tmp_path,
        manifest,
        found,
        _result(**{"seed.p.codes": "success", "test.p.codes_unique": "pass", "test.p.mart_to_codes": "fail"}),
    )
    assert seeds.unchanged(tmp_path, found) == {"codes"}, "a mart's failing test is the mart's"
    seeds.record(tmp_path, manifest, found, _result(**{"test.p.mart_to_codes": "pass"}))  # the seed not run
    assert seeds.unchanged(tmp_path, found) == {"codes"}
    seeds.record(tmp_path, manifest, found, _result(**{"seed.p.codes": "error"}))
    assert seeds.unchanged(tmp_path, found) == set()
    changed = seeds.fingerprints(_manifest(_seed(checksum="new")))
    seeds.record(tmp_path, manifest, found, _result(**{"seed.p.codes": "success"}))
    assert seeds.unchanged(tmp_path, changed) == set(), "an edited CSV is loaded again"


def test_a_seed_is_unchanged_only_with_the_same_fingerprint_and_relation(tmp_path):
    state = seeds.SeedState(tmp_path)
    found = {"a": ("s", "a", "f1"), "b": ("s", "b", "f2")}
    assert state.unchanged(found) == set(), "nothing loaded yet"
    state.record(found)

    again = seeds.SeedState(tmp_path)  # read back from the state file
    assert again.unchanged(found) == {"a", "b"}
    assert again.unchanged({"a": ("s", "a", "f9")}) == set(), "new fingerprint"
    assert again.unchanged({"a": ("t", "a", "f1")}) == set(), "other schema"
    again.record({}, failed=["b"])
    assert seeds.SeedState(tmp_path).unchanged(found) == {"a"}, "a failed load is forgotten"


def test_a_damaged_state_file_loads_every_seed_again(tmp_path):
    (tmp_path / seeds.STATE_FILE).write_text("{not json", encoding="utf-8")
    state = seeds.SeedState(tmp_path)
    assert state.unchanged({"a": ("s", "a", "f1")}) == set()
    state.record({"a": ("s", "a", "f1")})
    assert seeds.SeedState(tmp_path).unchanged({"a": ("s", "a", "f1")}) == {"a"}
