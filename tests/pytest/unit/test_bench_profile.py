"""The bench's statement profile (bench/instrument.py): what a statement of the run is, and when it ends."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from bench.instrument import SLOWEST_KEPT, SqlProfile, Statement, breakdown, statement_counts

HOOK = "operation.cdc_lakehouse.cdc_lakehouse-on-run-start-0"


def _event(name: str, sql: str = "", node: str = "") -> SimpleNamespace:
    data = SimpleNamespace(sql=sql, node_info=SimpleNamespace(unique_id=node), elapsed=0.0)
    return SimpleNamespace(info=SimpleNamespace(name=name), data=data)


def test_a_hook_statement_ends_when_the_first_node_starts_not_at_the_next_hook():
    profile = SqlProfile()
    profile(_event("SQLQuery", "create table if not exists meta.cdc_batch_log (x int)", HOOK))
    profile(_event("NodeStart", node="model.cdc_lakehouse.orders"))
    hook = profile.statements[0]
    assert hook.end is not None, "the hook's statement ran on until the run's end (on-run-end's first statement)"
    profile(_event("SQLQuery", "merge into current.orders", "model.cdc_lakehouse.orders"))
    profile(_event("NodeFinished", node="model.cdc_lakehouse.orders"))
    profile(_event("SQLQuery", "insert into meta.cdc_batch_log select 1", HOOK.replace("start", "end")))
    profile.close(profile.statements[-1].start + 1.0)
    assert hook.end <= profile.statements[1].start
    counts = statement_counts(profile.statements, ["orders"])
    assert (counts["run_statements"], counts["node_statements_max"], counts["statements"]) == (2, 1, 3)


def test_a_breakdown_keeps_the_slowest_statements_and_counts_them_all():
    # 200 tables send thousands of statements; the committed results keep the slowest, slowest first.
    statements = [Statement(f"select {i}", "model.x", start=0.0, end=float(i % 7) + i / 1000) for i in range(500)]
    detail = breakdown(statements, wall=10_000.0)
    kept = [s["seconds"] for s in detail["statements"]]
    expected = sorted((round(s.seconds, 3) for s in statements), reverse=True)[:SLOWEST_KEPT]
    assert (detail["statement_count"], kept) == (500, expected)
    assert sum(detail["seconds_by_category"].values()) == pytest.approx(10_000.0, abs=0.01)
