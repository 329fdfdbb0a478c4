"""Personal data: a data subject erased from the whole lakehouse (`erase`), or its personal columns
corrected everywhere they are held (`rectify`): tables, raw landing files, older snapshots.

    subjects   where subjects are declared (dbt yml meta), their keyed hashes, the secret
    raw_files  raw landing files (on this disk or on S3) rewritten without the subject, or with the correction
    registers  the report, the checks before any write, the register, history expiry, the log
    erase      the erasure, step by step
    rectify    the rectification, step by step
"""

from python_hooks.personal_data.erase import erase
from python_hooks.personal_data.raw_files import rectify_raw_file, scrub_raw_file
from python_hooks.personal_data.rectify import rectify
from python_hooks.personal_data.registers import ErasureReport, summary
from python_hooks.personal_data.subjects import (
    SECRET_ENV,
    ErasureError,
    Holder,
    hash_sql,
    holders,
    parse_changes,
    secret_from_env,
    subject_hash,
    undeclared_downstream,
    value_hash,
)

__all__ = [
    "SECRET_ENV",
    "ErasureError",
    "ErasureReport",
    "Holder",
    "erase",
    "hash_sql",
    "holders",
    "parse_changes",
    "rectify",
    "rectify_raw_file",
    "scrub_raw_file",
    "secret_from_env",
    "subject_hash",
    "summary",
    "undeclared_downstream",
    "value_hash",
]
