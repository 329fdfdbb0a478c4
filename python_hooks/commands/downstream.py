"""`run --every SECONDS --downstream-every LONGER`: the current-state tables take their batches at every turn of
the loop, and the models and snapshots downstream of them (a snapshot and the models that feed it, marts) are
built at most every LONGER seconds: in the loop's first turn, then in the first turn that starts LONGER seconds or
more after the last one that built them. A team schedules its snapshots apart from its tables' loop so; a snapshot
then keeps one version per build of it (a customer changed twice between two builds keeps the later change only),
and a change waits in no turn for the snapshot's chain to be visible in its table.

A turn that holds them back (`held`) leaves them out of its dbt build with their tests, as a run leaves out the
models downstream of tables that received nothing (commands/selection.py: `idle_descendants`). The tables it
applies a batch to are owed, written down before its build starts (a turn killed after a table's commit leaves the
debt, at worst one table too many): the next turn that builds downstream, or the next `make run` in any process, builds
the models and snapshots downstream of them even when those tables have nothing new then. They are kept by their
relation (`schema.table`: one warehouse's state serves every schema) in `<state dir>/downstream-owed.json` (a loop
stopped, or killed, between the two leaves them there) and forgotten once a build without a selection of the
caller's own has succeeded with them. The state is this machine's, as the ledger's cache is: two loops on two
machines over one shared warehouse each keep their own.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Collection
from pathlib import Path

OWED_FILE = "downstream-owed.json"


def read_owed(folder: Path) -> set[str]:
    """The current-state tables (`schema.table`) whose downstream models and snapshots a held turn left to build
    (none when the file is missing or unreadable: then nothing is owed, as before the loop held any)."""
    try:
        return set(json.loads((folder / OWED_FILE).read_text()))
    except (OSError, ValueError, TypeError):
        return set()


def write_owed(folder: Path, relations: Collection[str]) -> None:
    """Keeps `relations` (removes the file when there are none), written whole or not at all."""
    path = folder / OWED_FILE
    if not relations:
        path.unlink(missing_ok=True)
        return
    folder.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".tmp")
    partial.write_text(json.dumps(sorted(relations)))
    os.replace(partial, path)


class Debt:
    """What is owed to the downstream models of one run's tables (`relations`: relation -> model), read once; kept
    beside the entries of the tables of other schemas in the same state."""

    def __init__(self, folder: Path, relations: dict[str, str]) -> None:
        self.folder, self.relations = folder, relations
        self.stored = read_owed(folder)
        self.owed = {relations[relation] for relation in self.stored if relation in relations}

    def keep(self, models: Collection[str]) -> None:
        """Writes the run's tables' debt as `models` (when it changed), the others' as they were."""
        if set(models) == self.owed:
            return
        mine = {relation for relation, model in self.relations.items() if model in models}
        write_owed(self.folder, (self.stored - self.relations.keys()) | mine)


def next_owed(
    owed: set[str], applied: set[str], held: bool, built: bool, left_out: Collection[str] = frozenset()
) -> set[str]:
    """Pure: the models owed after a run. `applied`: the tables the run applied a batch to; `held`: it left the
    downstream models out; `built`: its build succeeded; `left_out`: the owed tables some of whose downstream
    models and snapshots the caller's selection (--select ...) did not choose."""
    if held:
        return owed | applied
    if not built:
        return set(owed)
    return owed & set(left_out)


def cadence(every: float, clock: Callable[[], float] = time.monotonic) -> Callable[[], bool]:
    """A function for the loop to call as each turn starts: True when the turn holds the downstream models back
    (fewer than `every` seconds since the start of the last turn that built them), False for the first turn and
    when they are due (it then counts from this turn's start)."""
    last: float | None = None

    def holds() -> bool:
        nonlocal last
        now = clock()
        if last is not None and now - last < every:
            return True
        last = now
        return False

    return holds
