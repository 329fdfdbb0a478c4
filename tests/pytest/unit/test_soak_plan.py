"""The pure parts of `make soak` (tests/pytest/soak/): its knobs, its timetable, the flatness verdict and
the file names and values its producers write. The soak itself is not run here (it takes hours)."""

from __future__ import annotations

import base64
import datetime as dt
import os
from decimal import Decimal

import pytest

from python_hooks.live import sink
from soak.checks import METADATA_VERSIONS, Kill, _shift_after_kill, storage
from soak.producers import connect_decimal, dms_file_name
from soak.settings import (
    Settings,
    compared,
    from_env,
    killed_runs,
    late_minute,
    maintain_minutes,
    redelivery_minute,
    run_minutes,
)
from soak.settings import flat as flat_verdict


def test_defaults_are_the_issues_day():
    settings = from_env({})
    assert (settings.tables, settings.minutes, settings.run_every, settings.maintain_every) == (20, 1440, 5, 60)
    assert len(run_minutes(settings)) == 288
    assert maintain_minutes(settings) == list(range(60, 1441, 60))
    kills = killed_runs(settings)
    assert len(kills) == 3, "1 % of 288 runs, rounded"
    assert kills == killed_runs(settings), "the same seed kills the same runs"
    assert 1 not in kills and 288 not in kills, "not the run that creates the tables, not the day's last"
    assert settings.erase_minute in run_minutes(settings)


def test_small_day_and_explicit_kills():
    settings = from_env({"SOAK_TABLES": "3", "SOAK_MINUTES": "30", "SOAK_MAINTAIN_EVERY": "15", "SOAK_KILL_RUNS": "3"})
    assert run_minutes(settings) == [5, 10, 15, 20, 25, 30]
    assert maintain_minutes(settings) == [15, 30]
    assert killed_runs(settings) == {3}
    assert (settings.schema_change_minute, settings.erase_minute) == (12, 20)
    # a day that does not end on a run minute still ends with a run and a maintenance
    odd = Settings(minutes=32, run_every=5, maintain_every=15)
    assert run_minutes(odd)[-1] == 32 and maintain_minutes(odd)[-1] == 32


@pytest.mark.parametrize(
    ("variables", "said"),
    [
        ({"SOAK_TABLES": "1"}, "SOAK_TABLES"),
        ({"SOAK_MINUTES": "30", "SOAK_KILL_RUNS": "7"}, "SOAK_KILL_RUNS"),
        ({"SOAK_MINUTES": "30", "SOAK_ERASE_AT": "12"}, "SOAK_ERASE_AT"),
    ],
)
def test_settings_refused_in_one_line(variables, said):
    with pytest.raises(ValueError, match=said):
        from_env(variables)


def test_every_table_gets_late_and_redelivered_files_in_a_day():
    for index in range(1, 21):
        assert sum(late_minute(index, m) for m in range(1, 1441)) >= 80
        assert sum(redelivery_minute(index, m) for m in range(1, 1441)) >= 60
        assert not late_minute(index, 0)


def test_flat_verdict():
    assert flat_verdict([10, 12, 11], [12, 13, 14], 1.5) == (11, 13, True)
    assert flat_verdict([10, 10, 10], [16, 16, 16], 1.5)[2] is False
    assert flat_verdict([], [1], 1.5)[2] is False, "no runs to compare is no verdict"


def test_dms_file_name_is_its_write_time():
    written = dt.datetime(2026, 11, 10, 10, 45, 12, 345000, tzinfo=dt.timezone.utc)
    assert dms_file_name(written) == "20261110-104512345.parquet"


@pytest.mark.parametrize("value", ["0.00", "1.00", "-1.28", "12345.67", "-99999.99", "1.27", "1.28"])
def test_connect_decimal_reads_back_through_the_sink(value):
    schema = {"type": "bytes", "name": sink.CONNECT_DECIMAL, "parameters": {"scale": "2"}}
    encoded = connect_decimal(Decimal(value))
    base64.b64decode(encoded)
    assert sink.arrow_value(schema, encoded) == Decimal(value)


def test_a_kills_shift_keeps_every_event_counted():
    wanted = {"files": 5, "change_events": 30, "truncates": 0, "rows_inserted": 8, "rows_updated": 14}
    wanted |= {"rows_deleted": 4, "ignored_older": 0, "ignored_redelivered": 2, "ignored_tombstoned": 0}
    wanted |= {"ignored_truncated": 0, "superseded": 2, "deletes_without_row": 0}
    shifted = dict(wanted, rows_inserted=0, rows_updated=0, rows_deleted=0, ignored_redelivered=28)
    assert _shift_after_kill(shifted, wanted)
    assert not _shift_after_kill(dict(shifted, ignored_redelivered=27), wanted), "an event not counted"
    assert not _shift_after_kill(dict(shifted, files=4), wanted)


def test_flatness_compares_an_hour_of_runs_at_each_end():
    day = from_env({})
    minutes = [m for m in run_minutes(day) if m not in (5, 10)]  # run 1 and a recovery left out
    first, last = compared(minutes, day)
    assert first == list(range(15, 75, 5)) and last == list(range(1385, 1441, 5)), "12 runs: an hour"
    small = from_env({"SOAK_TABLES": "3", "SOAK_MINUTES": "30"})
    assert compared([15, 25, 30], small) == ([15], [30]), "a third of a short day's runs"


def _table_folder(root, metadata_files: int, data_files: int):
    """A table's folder as Iceberg leaves it: `metadata_files` metadata files and `data_files` data files."""
    (root / "metadata").mkdir(parents=True)
    (root / "data").mkdir()
    metadata = [root / "metadata" / f"{n:05d}-x.metadata.json" for n in range(metadata_files)]
    data = [root / "data" / f"{n:05d}.parquet" for n in range(data_files)]
    for path in metadata + data:
        path.write_text("{}")
    return metadata, data


def _at(path, moment: dt.datetime) -> None:
    """The file's mtime set to `moment`, a naive UTC time as the soak's checks keep them."""
    seconds = moment.replace(tzinfo=dt.timezone.utc).timestamp()
    os.utime(path, (seconds, seconds))


def test_storage_leaves_out_what_a_kill_wrote_but_not_more(tmp_path):
    """A commit cut by a kill leaves a metadata file and data files no snapshot refers to: not counted against the
    retention's bounds when written while the killed run ran; the same files written at another time are."""

    now = dt.datetime(2026, 12, 6, 21, 0)
    kill = Kill("t", "after_pin", now - dt.timedelta(minutes=30), now - dt.timedelta(minutes=29))
    during, other = kill.started + dt.timedelta(seconds=10), now - dt.timedelta(minutes=10)
    metadata, data = _table_folder(tmp_path / "t", METADATA_VERSIONS + 2, 3)  # one metadata file over the bound
    for path in metadata + data:
        _at(path, other)
    table = {
        "kind": "current_state",
        "location": str(tmp_path / "t"),
        "snapshots": [(n, now) for n in range(3)],
        "files": [str(p) for p in data[:2]],  # data[2]: referenced by no snapshot
    }

    def verdict(orphans_at: dt.datetime) -> tuple[bool, dict]:
        _at(metadata[0], orphans_at)
        _at(data[2], orphans_at)
        checks, figures = storage({"tables": {"s.t": table}}, Settings(), now, [kill])
        return checks[0].ok, figures["s.t"]

    ok, figures = verdict(during)
    assert ok and figures["left_by_kills"] == 1 and figures["metadata_files"] == METADATA_VERSIONS + 2
    ok, figures = verdict(other)
    assert not ok and figures["left_by_kills"] == 0
