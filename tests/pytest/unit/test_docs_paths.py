"""Every repository path named in README.md, docs/*.md and the docstrings of python_hooks/ exists, so that
the next file moved or renamed cannot leave a sentence pointing nowhere. No JVM."""

from __future__ import annotations

import ast
import re

from helpers.paths import PROJECT

ROOTS = "python_hooks|macros|models|snapshots|seeds|tests|scripts|bench|sample_data|docs|profiles|jars|\\.github"
# A path: a known top folder, then segments; placeholders (<table>, *, …, $VAR, {x}) make it a pattern, not a path.
PATH = re.compile(rf"(?<![\w./-])((?:{ROOTS})/[\w./-]*[\w/])")
# Written by runs, not in the repository.
GENERATED = ("jars/lib", "docs/reference/", "bench/results/scale/latest", "tests/pytest/soak/report")


def _named(text: str) -> set[str]:
    found = set()
    for match in PATH.finditer(text):
        path, after = match.group(1), text[match.end() : match.end() + 1]
        if (after and after in "<*…$&{") or text[match.end() : match.end() + 2] == ".*":
            continue
        if path.startswith(GENERATED) or path.endswith("/."):
            continue
        found.add(path.rstrip("."))
    return found


def _docstrings() -> dict[str, str]:
    texts = {}
    for source in sorted((PROJECT / "python_hooks").rglob("*.py")):
        tree = ast.parse(source.read_text(encoding="utf-8"))
        nodes = [tree, *(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.ClassDef))]
        texts[str(source.relative_to(PROJECT))] = "\n".join(filter(None, (ast.get_docstring(n) for n in nodes)))
    return texts


def test_every_path_named_in_the_docs_and_docstrings_exists():
    texts = {str(p.relative_to(PROJECT)): p.read_text(encoding="utf-8") for p in (PROJECT / "docs").rglob("*.md")}
    texts["README.md"] = (PROJECT / "README.md").read_text(encoding="utf-8")
    texts.update(_docstrings())
    missing = sorted(
        f"{where}: {path}" for where, text in texts.items() for path in _named(text) if not (PROJECT / path).exists()
    )
    assert not missing, "named but not in the repository:\n" + "\n".join(missing)


def test_a_missing_path_is_found():
    assert _named("see `python_hooks/nowhere.py` and models/staging/<source>/x.sql") == {"python_hooks/nowhere.py"}
