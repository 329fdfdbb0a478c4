"""The manual's references cannot drift: docs/reference/*.md is what scripts/docs_reference.py makes of the
code now (every click command and option, every environment variable and config key the code reads, every
Make target with its help line), docs/operations.md quotes every message a run can print, and no line of
the manual is over 120 characters. No JVM."""

from __future__ import annotations

import pytest

from helpers.paths import PROJECT
from scripts import docs_reference


@pytest.mark.parametrize("page", sorted(docs_reference.PAGES))
def test_reference_page_is_what_the_code_says(page):
    try:
        wanted = docs_reference.PAGES[page]()
    except docs_reference.MissingNote as missing:
        pytest.fail(str(missing))
    written = (docs_reference.REFERENCE / page).read_text(encoding="utf-8")
    assert written == wanted, f"docs/reference/{page} is stale: run .venv/bin/python -m scripts.docs_reference"


def test_every_click_command_and_option_is_in_the_cli_reference():
    from python_hooks.cli import main

    text = (docs_reference.REFERENCE / "cli.md").read_text(encoding="utf-8")
    for path, command in docs_reference._commands(main):
        assert f"## `{' '.join(path)}`" in text
        for param in command.params:
            for opt in getattr(param, "opts", []):
                if opt.startswith("-"):
                    assert f"`{opt}`" in text, f"{' '.join(path)} {opt} is not in docs/reference/cli.md"


def test_every_phony_target_has_a_help_line():
    helps = docs_reference.make_help()
    missing = [target for target in docs_reference.phony_targets() if target not in helps]
    assert not missing, f"Make targets without a line in `make help`: {missing}"


def test_a_target_without_help_is_found():
    makefile = '.PHONY: help demo new-target\nhelp:\n\t@echo "make demo    the demo;  make help  this"\n'
    helps = docs_reference.make_help(makefile)
    assert helps == {"demo": "the demo", "help": "this"}
    assert [t for t in docs_reference.phony_targets(makefile) if t not in helps] == ["new-target"]


def test_help_lines_split_only_at_targets():
    makefile = (
        'help:\n\t@echo "make test-live  the live tests (no Spark; make test runs them too)"\n'
        '\t@echo "                 then more"\n\t@echo "make bench  the bench; make bench-s3: on S3"\n'
    )
    assert docs_reference.make_help(makefile) == {
        "test-live": "the live tests (no Spark; make test runs them too) then more",
        "bench": "the bench",
        "bench-s3": "on S3",
    }


def test_every_variable_and_key_the_code_reads_is_described():
    notes = docs_reference._notes()
    assert set(docs_reference.variables_in_code()) <= set(notes["variables"])
    for where, keys in docs_reference.keys_in_code().items():
        assert set(keys) <= set(notes["keys"][where]), where
    # the ones the issue names, so that the scan itself cannot go blind
    assert {"CDC_LANDING_ROOT", "CDC_WAREHOUSE", "CDC_ERASURE_SECRET"} <= set(docs_reference.variables_in_code())
    keys = docs_reference.keys_in_code()
    assert {"cdc_producer", "debezium_shape"} <= set(keys["meta"]) and "unique_key" in keys["config"]


def test_operations_quotes_every_message_a_run_can_print():
    messages = docs_reference.run_messages()
    assert len(messages) > 40  # the macros' and the hooks' messages were found
    missing = docs_reference.messages_missing()
    assert not missing, "docs/operations.md lacks:\n" + "\n".join(f"{m.where}: {m.quote}" for m in missing)


def test_no_line_of_the_manual_is_over_120_characters():
    long = []
    for page in [PROJECT / "README.md", *sorted((PROJECT / "docs").rglob("*.md"))]:
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            if len(line) > 120:
                long.append(f"{page.relative_to(PROJECT)}:{number} ({len(line)})")
    assert not long, long


def test_readme_is_a_front_door():
    assert len((PROJECT / "README.md").read_text(encoding="utf-8").splitlines()) <= 200
