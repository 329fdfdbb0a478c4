"""Independent oracle: the current state of a DMS table, replayed in pure Python from raw files.

Written from the rules in ../shared/CDC_FORMATS.md, not from the pipeline's SQL: full-load rows
(no Op) are inserts at load time; changes apply in commit order, ties broken by AR_H_CHANGE_SEQ;
I and U write the row image, D removes the key. Replaying an event twice changes nothing.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

METADATA = {"op", "ar_h_change_seq", "last_update_time"}


def read_events(folder: Path) -> list[dict]:
    events = []
    # Files in the folder or its date subfolders (DMS DatePartitionEnabled: <yyyy>/<mm>/<dd>/).
    for path in sorted(Path(folder).rglob("*.parquet"), key=lambda p: p.name):
        for position, record in enumerate(pq.read_table(path).to_pylist()):
            lowered = {name.lower(): value for name, value in record.items()}
            events.append(
                {
                    "op": lowered.get("op") or "I",
                    "ts": lowered["last_update_time"],
                    "seq": lowered.get("ar_h_change_seq"),
                    "full_load": path.name.startswith("LOAD"),
                    "file": path.name,
                    "position": position,
                    "row": {k: v for k, v in lowered.items() if k not in METADATA},
                }
            )
    return events


def replay(folder: Path, key: list[str]) -> dict[tuple, dict]:
    """key tuple -> business columns + `_cdc_op` and `_cdc_ts` of the change that produced the row."""
    ordered = sorted(
        read_events(folder),
        key=lambda e: (e["ts"], not e["full_load"], e["seq"] or "", e["file"], e["position"]),
    )
    state: dict[tuple, dict] = {}
    for event in ordered:
        k = tuple(event["row"][c] for c in key)
        if event["op"] == "D":
            state.pop(k, None)
        else:
            state[k] = {**event["row"], "_cdc_op": event["op"], "_cdc_ts": event["ts"]}
    return state
