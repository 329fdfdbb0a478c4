"""Where the project is on this machine: the one place its root is computed (env.py and object_store.py
take it from here, so that neither imports the other for it)."""

from __future__ import annotations

from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
