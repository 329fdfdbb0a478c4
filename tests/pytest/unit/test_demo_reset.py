"""`make demo` starts from scratch (sample_data/demo.py: `_reset`), without Spark: it deletes the
warehouse's state folder (CDC_STATE_DIR) under the same rule as the warehouse, and deletes nothing while
another process has that warehouse open. Each case runs in a child process: the reset takes and gives
back the embedded lock, which this pytest process holds for its own warehouse."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from helpers import lock_holder
from helpers.paths import PROJECT

RESET = """
import sys
from pathlib import Path
from python_hooks.project import env, storage
from sample_data import demo
root = Path(sys.argv[1])
env.PROJECT_ROOT = root  # data/ is <root>/data
demo._reset(storage.Location.parse(sys.argv[2]), storage.Location.parse(sys.argv[3]), Path(sys.argv[4]), "local")
print("reset")
"""


def _reset(root: Path, landing: Path, warehouse: Path, state: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", RESET, str(root), str(landing), str(warehouse), str(state)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=PROJECT,
    )


def _files(folder: Path) -> list[str]:
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*"))


def test_a_state_folder_outside_data_that_holds_files_is_refused_and_nothing_is_deleted(tmp_path: Path) -> None:
    landing, warehouse, state = tmp_path / "data" / "landing", tmp_path / "data" / "warehouse", tmp_path / "elsewhere"
    (landing / "debezium").mkdir(parents=True)
    (landing / "debezium" / "a.parquet").write_bytes(b"x")
    (state / "metastore_db").mkdir(parents=True)
    (state / "metastore_db" / "seg0").write_bytes(b"y")
    before = _files(tmp_path)
    done = _reset(tmp_path, landing, warehouse, state)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"make demo starts from scratch and deletes {state} (CDC_STATE_DIR);"), last
    assert _files(tmp_path) == before


def test_nothing_is_deleted_while_another_process_has_the_warehouse(tmp_path: Path) -> None:
    data = tmp_path / "data"
    landing, warehouse = data / "landing", data / "warehouse"
    (landing / "debezium").mkdir(parents=True)
    (landing / "debezium" / "a.parquet").write_bytes(b"x")
    (warehouse / "metastore_db").mkdir(parents=True)
    with lock_holder.holding(warehouse) as holder:
        before = _files(tmp_path)
        done = _reset(tmp_path, landing, warehouse, warehouse)
        assert done.returncode != 0
        last = done.stderr.strip().splitlines()[-1]
        assert last.startswith("make demo deletes nothing: The embedded warehouse"), last
        assert f"in use by pid {holder.pid} " in last
        assert _files(tmp_path) == before
    done = _reset(tmp_path, landing, warehouse, warehouse)  # the holder gone: the demo starts from scratch
    assert done.returncode == 0, done.stderr[-2000:]
    assert not (landing / "debezium").exists() and not warehouse.exists()
