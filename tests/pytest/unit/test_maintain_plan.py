"""The plan of `make maintain` (python_hooks/commands/maintain.py) without Spark: retention config, which
nodes are maintained, relation names and timestamps as they enter SQL."""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace

import pytest

from python_hooks.commands.maintain import Retention, maintenance_targets
from python_hooks.project.iceberg import _timestamp
from python_hooks.project.sql import split_relation


def _node(name: str, materialized: str, **config) -> SimpleNamespace:
    return SimpleNamespace(
        resource_type="snapshot" if materialized == "snapshot" else "model",
        name=name,
        schema="s",
        alias=config.pop("alias", None),
        config={"materialized": materialized, "file_format": config.pop("file_format", "iceberg"), **config},
    )


def test_retention_from_config() -> None:
    assert Retention.from_config(None, "m") == Retention(days=7, keep_last=10, metadata_versions=20)
    assert Retention.from_config({"days": 1.5}, "m") == Retention(days=1.5, keep_last=10, metadata_versions=20)
    assert Retention.from_config({"keep_last": 3}, "m", Retention(days=2)) == Retention(days=2, keep_last=3)
    for bad, message in (
        ({"keep_last": 0}, "m: cdc_retention.keep_last must be an integer >= 1, got 0"),
        ({"keep_last": True}, "m: cdc_retention.keep_last must be an integer >= 1"),
        ({"days": "7"}, "m: cdc_retention.days must be a number >= 0, got '7'"),
        ({"days": -1}, "m: cdc_retention.days must be a number >= 0"),
        ({"day": 7}, r"m: cdc_retention has unknown key\(s\) \['day'\]"),
        (7, "m: cdc_retention must be a mapping"),
    ):
        with pytest.raises(ValueError, match=message):
            Retention.from_config(bad, "m")


def test_targets_are_iceberg_tables_with_their_retention() -> None:
    nodes = {
        "a": _node("cur", "cdc_current_state", cdc_retention={"keep_last": 3}),
        "b": _node("view_model", "view"),
        "c": _node("eph", "ephemeral"),
        "d": _node("parquet_table", "table", file_format="parquet"),
        "e": _node("snap", "snapshot"),
        "f": _node("mart", "table", alias="mart_alias"),
    }
    targets = maintenance_targets(SimpleNamespace(nodes=nodes), "s_cdc_meta", ["cdc_tombstones", "cdc_file_ledger"])
    assert [(t.name, t.kind) for t in targets] == [
        ("s.cur", "current_state"),
        ("s.mart_alias", "table"),
        ("s.snap", "snapshot"),
        ("s_cdc_meta.cdc_file_ledger", "meta"),
        ("s_cdc_meta.cdc_tombstones", "meta"),
    ]
    assert targets[0].retention == Retention(keep_last=3) and targets[0].model == "cur"
    assert targets[1].relation == "`s`.`mart_alias`"
    bad = {"x": _node("bad_model", "table", cdc_retention={"keep_last": -1})}
    with pytest.raises(ValueError, match="bad_model: cdc_retention.keep_last"):
        maintenance_targets(SimpleNamespace(nodes=bad), "s_cdc_meta")


def test_relation_names_and_timestamps() -> None:
    assert split_relation("lake_current.crm__customer") == ("lake_current", "crm__customer")
    assert split_relation("`a.b`.`c``d`") == ("a.b", "c`d")
    for bad in ("table_only", "a.b.c", "`a.b", ".b"):
        with pytest.raises(ValueError, match="is not a relation of the form schema.table"):
            split_relation(bad)
    zone = dt.timezone(dt.timedelta(hours=2))
    assert _timestamp(dt.datetime(2026, 11, 23, 12, 0, tzinfo=zone)) == "timestamp '2026-11-23 10:00:00.000000+00:00'"
    assert _timestamp(dt.datetime(2026, 11, 23, 12, 0)) == "timestamp '2026-11-23 12:00:00.000000+00:00'"
