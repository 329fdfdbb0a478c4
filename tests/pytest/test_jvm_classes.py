"""The embedded driver JVM's class archive (python_hooks/project/jvm_classes.py): the archive `make install`
made is mapped by the run's JVM, and the check that guards putting a new one in place refuses a truncated one
(a JVM that maps a truncated archive stops with SIGBUS)."""

from __future__ import annotations

import shutil
from pathlib import Path

from python_hooks.commands.jvm_classes import usable
from python_hooks.project import env, jvm_classes

MISSING = "no class archive: `make install` makes it (python -m python_hooks jvm-classes)"


def test_the_runs_driver_jvm_maps_the_class_archive(spark):
    assert jvm_classes.ARCHIVE.is_file(), MISSING
    pid = spark._jvm.java.lang.ProcessHandle.current().pid()
    arguments = list(spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert f"-XX:SharedArchiveFile={jvm_classes.ARCHIVE}" in arguments, env.JVM_OPTIONS
    # Mapped, not only named: Java skips an archive of another build or class path without a word.
    assert str(jvm_classes.ARCHIVE) in Path(f"/proc/{pid}/maps").read_text(encoding="utf-8")


def test_a_truncated_archive_is_refused_and_the_made_one_accepted(tmp_path):
    assert jvm_classes.ARCHIVE.is_file(), MISSING
    java = shutil.which("java")
    truncated = tmp_path / "classes.jsa"
    with jvm_classes.ARCHIVE.open("rb") as whole:
        truncated.write_bytes(whole.read(1_000_000))
    assert not usable(java, truncated)
    assert usable(java, jvm_classes.ARCHIVE)
