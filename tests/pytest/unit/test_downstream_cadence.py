"""`run --every --downstream-every` (python_hooks/commands/downstream.py): when a turn holds the models and snapshots
downstream of the current-state tables back, what it owes them, and that the debt outlives the process."""

from __future__ import annotations

from pathlib import Path

from python_hooks.commands import downstream


def test_the_first_turn_builds_then_a_turn_every_so_many_seconds():
    now = [100.0]
    holds = downstream.cadence(60, clock=lambda: now[0])
    seen = []
    for at in (100, 110, 150, 159.9, 160, 175, 219.9, 220.5, 221):
        now[0] = at
        seen.append(holds())
    # due at 100 (the first), at 160 (60 s after 100), at 220.5 (60 s after 160): counted from the due turn's start
    assert seen == [False, True, True, True, False, True, True, False, True]


def test_a_held_turn_owes_its_applied_tables_and_a_build_of_their_downstream_pays():
    owed = downstream.next_owed(set(), {"shop__customer"}, held=True, built=True)
    assert owed == {"shop__customer"}
    owed = downstream.next_owed(owed, {"shop__document"}, held=True, built=False)
    assert owed == {"shop__customer", "shop__document"}, "a failed held turn still applied its batches"
    assert downstream.next_owed(owed, set(), held=False, built=False) == owed, "a failed build owes"
    left = downstream.next_owed(owed, set(), held=False, built=True, left_out={"shop__document", "other"})
    assert left == {"shop__document"}, "a selection without some of a table's downstream models leaves it owed"
    assert downstream.next_owed(owed, {"shop__customer"}, held=False, built=True) == set()


def test_the_debt_is_kept_in_the_state_folder(tmp_path: Path):
    folder = tmp_path / "state"
    assert downstream.read_owed(folder) == set(), "nothing owed before a loop held anything back"
    downstream.write_owed(folder, {"b", "a"})
    assert downstream.read_owed(folder) == {"a", "b"}
    assert not list(folder.glob("*.tmp"))
    downstream.write_owed(folder, set())
    assert not (folder / downstream.OWED_FILE).exists()
    folder.mkdir(exist_ok=True)
    (folder / downstream.OWED_FILE).write_text("{not json")
    assert downstream.read_owed(folder) == set(), "an unreadable file owes nothing (as before any loop)"
