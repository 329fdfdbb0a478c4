"""`python -m python_hooks erase|rectify`: one session, then the erasure or the rectification
(python_hooks/personal_data/), and its summary; a refusal is one line and writes nothing."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from python_hooks import personal_data
from python_hooks.project.session import Session, SessionError

log = logging.getLogger("python_hooks.erase")

REACH_FAILED = "dbt could not parse the project or reach the warehouse: see the errors above"


def run_personal_data(
    action: str, subject: str, keys: Sequence[str], assignments: Sequence[str], reason: str, dbt_args: Sequence[str]
) -> list[str] | None:
    """The summary lines of an erasure (`action` erase) or a rectification; None when refused (logged)."""
    try:
        secret = personal_data.secret_from_env()
        changes = personal_data.parse_changes(assignments) if action == "rectify" else {}
        try:
            session = Session.start(dbt_args, quiet=True, meta_tables=True)
        except SessionError:
            raise personal_data.ErasureError(REACH_FAILED) from None
        with session:
            if action == "erase":
                report = personal_data.erase(session.warehouse, session.manifest, subject, keys, reason, secret)
            else:
                report = personal_data.rectify(
                    session.warehouse, session.manifest, subject, keys, changes, reason, secret
                )
    except personal_data.ErasureError as error:
        log.error("%s refused: %s", action, error)
        return None
    return personal_data.summary(report, action)
