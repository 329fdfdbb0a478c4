"""MkDocs hooks of the manual (mkdocs.yml): a page that links a file of the repository outside docs/
(`../bench/results/latest.md`, as it reads on GitHub or in an editor) gets it in the site under repo/,
so that figures come from their result files and no link of the manual points nowhere."""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

from mkdocs.structure.files import File, Files

PROJECT = Path(__file__).resolve().parents[1]
_LINK = re.compile(r"\]\(((?:\.\./)+[^)#\s]+)(#[^)\s]*)?\)")


def _outside(page_uri: str, target: str) -> str | None:
    """The repository path a page's relative link reaches when it leaves docs/, else None."""
    joined = posixpath.normpath(posixpath.join("docs", posixpath.dirname(page_uri), target))
    if joined.startswith(("docs/", "../")) or not (PROJECT / joined).is_file():
        return None
    return joined


def on_files(files: Files, config) -> Files:
    docs = Path(config["docs_dir"])
    for page in sorted(docs.rglob("*.md")):
        uri = page.relative_to(docs).as_posix()
        for target, _ in _LINK.findall(page.read_text(encoding="utf-8")):
            path = _outside(uri, target)
            if path and files.get_file_from_path(f"repo/{path}") is None:
                files.append(File.generated(config, f"repo/{path}", abs_src_path=str(PROJECT / path)))
    return files


_ANY_LINK = re.compile(r"\]\(([^)#\s:]+)(#[^)\s]*)?\)")


def _from_repository_page(markdown: str, uri: str) -> str:
    """In a repository file shown under repo/ (the README), a link into docs/ goes to the manual's page."""
    here = posixpath.dirname(uri[len("repo/") :])

    def rewrite(match: re.Match) -> str:
        path = posixpath.normpath(posixpath.join(here, match.group(1)))
        if not path.startswith("docs/"):
            return match.group(0)
        relative = posixpath.relpath(path[len("docs/") :], posixpath.dirname(uri))
        return f"]({relative}{match.group(2) or ''})"

    return _ANY_LINK.sub(rewrite, markdown)


def on_page_markdown(markdown: str, page, config, files) -> str:
    uri = page.file.src_uri
    if uri.startswith("repo/"):
        return _from_repository_page(markdown, uri)

    def rewrite(match: re.Match) -> str:
        path = _outside(uri, match.group(1))
        if path is None:
            return match.group(0)
        relative = posixpath.relpath(f"repo/{path}", posixpath.dirname(uri) or ".")
        return f"]({relative}{match.group(2) or ''})"

    return _LINK.sub(rewrite, markdown)
