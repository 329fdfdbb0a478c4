"""python_hooks/commands/status.py without a warehouse: states, exit codes, the run's table, the status text."""

from __future__ import annotations

import datetime as dt

import pytest

from python_hooks.commands.status import TableStatus, duration, exit_code, ignored, render, run_table

AT = dt.datetime(2026, 11, 24, 12, 0, 0)


def _row(model: str, status: str = "applied", **counts) -> dict:
    row = {
        "run_id": "8c697ecf0000",
        "model_name": model,
        "status": status,
        "finished_at": AT,
        "seconds": 3.25,
        "files": 2,
        "change_events": 10,
        "rows_inserted": 2,
        "rows_updated": 3,
        "rows_deleted": 1,
        "ignored_older": 1,
        "ignored_redelivered": 2,
        "ignored_tombstoned": 0,
        "ignored_truncated": 1,
        "files_refused": 0,
        "refusal": None,
    }
    return {**row, **counts}


def _status(model: str = "crm__customer_master", **fields) -> TableStatus:
    values = {
        "model": model,
        "source": "crm.customer_master",
        "rows": 21,
        "last": _row(model),
        "refused": None,
        "lag_seconds": 600.0,
        "files_waiting": 0,
        "schema_change": None,
        "warn_after": 12 * 3600.0,
        "error_after": 24 * 3600.0,
    }
    return TableStatus(**{**values, **fields})


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (None, "-"),
        (0, "0 s"),
        (59.9, "59 s"),
        (61, "1 min"),
        (3 * 3600 + 5 * 60, "3 h 05 min"),
        (5 * 86400 + 7200, "5 d 02 h"),
    ],
)
def test_duration(seconds, text):
    assert duration(seconds) == text


def test_state_and_exit_code():
    assert _status().state == "ok"
    assert _status(lag_seconds=13 * 3600.0).state == "warn"
    assert _status(lag_seconds=25 * 3600.0).state == "error"
    assert _status(rows=None, last=None, lag_seconds=None).state == "not built"
    refused = _row("crm__customer_master", "refused", files_refused=1, refusal="raw file x.parquet: unknown op")
    assert _status(refused=refused).state == "refused"
    assert _status(lag_seconds=10**9, warn_after=None, error_after=None).state == "ok", "no threshold, never stale"
    assert exit_code([_status(), _status(lag_seconds=13 * 3600.0)]) == 0, "a warning does not fail"
    assert exit_code([_status(), _status(lag_seconds=25 * 3600.0)]) == 1
    assert exit_code([_status(refused=refused)]) == 1


def test_ignored_sums_the_four_reasons():
    assert ignored(_row("m")) == 4


def test_run_table_a_line_per_table_the_run_logged_then_how_many_had_no_batch():
    models = ["crm__customer_master", "inventory__product", "salesdb__customer"]
    applied = _row("crm__customer_master", newest_commit_at=AT - dt.timedelta(minutes=10))
    refused = _row("salesdb__customer", "refused", files_refused=2, newest_commit_at=None)
    lines = run_table(models, [refused, applied], AT)
    assert lines[0].split() == ["table", "inserted", "updated", "deleted", "ignored", "refused", "lag"]
    assert lines[1].split() == ["crm__customer_master", "2", "3", "1", "4", "0", "10", "min"]
    assert lines[2].split() == ["salesdb__customer", "0", "0", "0", "0", "2", "-"], "refused: not counted"
    assert lines[3] == "  and 1 other current-state table(s): no batch this run"
    assert len(lines) == 4
    assert run_table(models, [], AT) == ["  no batch this run for its 3 current-state table(s)"]
    assert len(run_table(models[:1], [applied], AT)) == 2, "every table logged"


def test_run_table_reads_the_newest_commit_as_a_batch_logs_it():
    """A batch's line (macros/cdc/batch_log.sql: cdc_run_table_row) says its newest commit as text."""
    said = (AT - dt.timedelta(hours=1, minutes=5)).strftime("%Y-%m-%d %H:%M:%S.%f")
    lines = run_table(["crm__customer_master"], [_row("crm__customer_master", newest_commit_at=said)], AT)
    assert lines[1].endswith("  1 h 05 min"), lines


def test_render_names_counts_refusal_and_what_to_do_last():
    refused = _row("salesdb__customer", "refused", files_refused=1, refusal="raw file 7.parquet is empty (0 bytes)")
    lines = render([_status(), _status("salesdb__customer", refused=refused, files_waiting=1)])
    text = "\n".join(lines)
    assert "crm__customer_master (crm.customer_master): OK, 21 rows, lag 10 min" in text
    assert "2 inserted, 3 updated, 1 deleted, 4 ignored (1 older, 2 re-delivered, 0 tombstoned, 1 truncated)" in text
    assert "files waiting 1, files refused 1" in text
    assert any(line.startswith("REFUSED salesdb__customer") and "7.parquet" in line for line in lines)
    assert lines[-2].startswith("What to do:") and lines[-1] == "2 table(s): 1 ok, 1 refused"


def test_render_names_every_flattened_source_truncates_not_seen():
    flat = _status("shop__customer", producer="debezium_flattened")
    envelope = _status("shop__order_line", producer="debezium_envelope")
    dms = _status("crm__customer_master", producer="dms")
    lines = render([flat, envelope, dms])
    unseen = [i for i, line in enumerate(lines) if line.strip().startswith("truncates not seen")]
    owners = [next(lines[j] for j in range(i, -1, -1) if not lines[j].startswith("  ")) for i in unseen]
    assert [owner.split(" ")[0] for owner in owners] == ["shop__customer"]
