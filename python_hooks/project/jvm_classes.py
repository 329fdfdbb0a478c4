"""The embedded driver JVM's class archive: Java's class-data sharing (CDS) for the classes Spark, Hive and
Derby load at every start, so that a process of its own (`make run` from a scheduler, `dbt run`, `dbt show`)
maps them from one file instead of reading and verifying them from the jars again.

`make install` makes it once (`python -m python_hooks jvm-classes`: python_hooks/commands/jvm_classes.py), in
this Python environment (`sys.prefix`: the venv, beside the pyspark it belongs to); env.py then fills in
CDC_JVM_OPTIONS with the options that use it, which the profile passes to the embedded driver. Without the
file, or with a file Java cannot use (another JDK, pyspark reinstalled), the JVM starts as before: the options
say nothing (`-Xlog:cds=off`), Java checks the archive against its own build and class path and skips one
that does not match. Pure: paths and strings, no process started (env.py runs at every interpreter start).
"""

from __future__ import annotations

import sys
from pathlib import Path

ARCHIVE = Path(sys.prefix) / "cdc-jvm" / "classes.jsa"
# Java prints a line on stdout when it cannot use an archive (another JDK): the pipeline's output stays its own.
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"


def mapping_options(archive: Path | None = None) -> str:
    """The driver's options that map `archive` (ARCHIVE)."""
    return f"-XX:SharedArchiveFile={archive or ARCHIVE} {QUIET}"


def use_options(archive: Path | None = None) -> str | None:
    """mapping_options(archive) when the archive exists; None otherwise."""
    return mapping_options(archive) if (archive or ARCHIVE).is_file() else None


def make_options(partial: Path) -> str:
    """The options of the JVM that writes the archive (to `partial`) when it exits."""
    return f"-XX:ArchiveClassesAtExit={partial} {QUIET}"
