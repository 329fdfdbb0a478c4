"""The manual (docs/, mkdocs.yml) as a site, opened in headless Chromium: built here with `mkdocs build
--strict` (what `make docs` runs), served over HTTP from a temporary folder, every page of the nav opened
in the browser, rendered (a title and an article with text), and every internal link of every page
answering 200 with its anchor present. No Spark.

Chromium is driven as in tests/pytest/test_docs_site.py (its DevTools class); skipped only when Chromium is
not installed (Debian package `chromium`; CHROMIUM=<path> picks another binary)."""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from urllib.parse import urldefrag, urljoin, urlparse

import pytest
import yaml

from helpers.paths import PROJECT
from test_docs_site import DevTools, chromium_path

pytestmark = pytest.mark.browser


def _nav_pages(nav) -> list[str]:
    pages = []
    for item in nav:
        for value in item.values() if isinstance(item, dict) else [item]:
            pages += _nav_pages(value) if isinstance(value, list) else [value]
    return pages


NAV = _nav_pages(yaml.safe_load((PROJECT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"])

# What the page rendered: its title, its article's text length, every link and every element id.
PAGE_JS = """
(() => {
    const article = document.querySelector('article');
    if (!article || document.readyState !== 'complete') return null;
    return JSON.stringify({
        title: document.title,
        h1: (article.querySelector('h1') || {}).innerText || '',
        text: article.innerText.length,
        links: Array.from(document.querySelectorAll('a[href]')).map(a => a.href),
        ids: Array.from(document.querySelectorAll('[id]')).map(e => e.id),
    });
})()
"""


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args) -> None:  # noqa: A002 - the base class's name
        pass


@pytest.fixture(scope="module")
def manual(tmp_path_factory) -> Iterator[str]:
    site = tmp_path_factory.mktemp("manual")
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert built.returncode == 0, built.stderr[-3000:]
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def rendered(manual, tmp_path_factory) -> dict[str, dict]:
    executable = chromium_path()
    if executable is None:
        pytest.skip("Chromium is not installed: `apt-get install chromium` (Debian), or set CHROMIUM=<path>.")
    browser = DevTools(executable, tmp_path_factory.mktemp("chromium-profile"))
    pages = {}
    try:
        for page in NAV:
            url = urljoin(manual, page.replace(".md", ".html"))
            browser.open_page(url)
            pages[url] = json.loads(browser.wait_for(PAGE_JS, f"the manual's page {page}"))
    finally:
        browser.close()
    return pages


def test_every_page_renders(rendered):
    assert len(rendered) == len(NAV) >= 15
    for url, page in rendered.items():
        assert page["h1"].strip("¶ \n") and page["title"].endswith("CDC lakehouse manual"), (url, page["title"])
        assert page["text"] > 200, f"{url}: {page['text']} characters of text"


def test_no_internal_link_is_broken(manual, rendered):
    ids: dict[str, set[str]] = {url: set(page["ids"]) for url, page in rendered.items()}
    broken, checked = [], 0
    for url, page in rendered.items():
        for link in page["links"]:
            target, anchor = urldefrag(link)
            if urlparse(target).netloc != urlparse(manual).netloc:
                continue
            checked += 1
            if target not in ids:
                try:
                    with urllib.request.urlopen(target) as answer:
                        body = answer.read().decode("utf-8", errors="replace")
                    ids[target] = set(re.findall(r'id="([^"]+)"', body))
                except urllib.error.HTTPError as error:
                    broken.append(f"{url} -> {link}: HTTP {error.code}")
                    continue
            if anchor and anchor not in ids[target]:
                broken.append(f"{url} -> {link}: no #{anchor} on the page")
    assert not broken, "\n".join(broken)
    assert checked > 500, f"only {checked} internal links found: did the pages render their navigation?"


def test_result_files_are_in_the_site(rendered):
    linked = {link for page in rendered.values() for link in page["links"]}
    assert any(link.endswith("repo/bench/results/latest.html") for link in linked), "bench/results/latest.md"
