"""The generated docs site, opened in headless Chromium: the lineage of `dim_customer` shows the
whole flow, raw source -> staging -> current state -> snapshot -> mart, and every node and column
of the project is described.

The site is the single-file one `make docs` writes (`dbt docs generate --static`), built here from
the project in a temporary target. Chromium is driven through the DevTools protocol over a pipe
(`--remote-debugging-pipe`): no driver, no websocket, no Python package beyond the standard
library. The test reads the lineage graph the page rendered (its cytoscape instance: nodes, edges
and their positions), and saves a screenshot to target/docs_lineage_dim_customer.png.

Skipped only when Chromium is not installed (Debian package `chromium`; `make`/CI install it);
CHROMIUM=<path> picks another binary."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers.paths import PROJECT
from python_hooks.commands.docs_coverage import check as docs_coverage_gaps

# The lineage of dim_customer, in flow order: every step must be on screen, each reachable from
# the one before along the graph's edges (models in between, e.g. an intermediate join, are fine).
LINEAGE = [
    "source.cdc_lakehouse.crm.customer_master",
    "model.cdc_lakehouse.stg_crm__customer_master",
    "model.cdc_lakehouse.crm__customer_master",
    "snapshot.cdc_lakehouse.customer_snapshot",
    "model.cdc_lakehouse.dim_customer",
]
SCREENSHOT = PROJECT / "target" / "docs_lineage_dim_customer.png"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-quic",
    "--no-first-run",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1600,1000",
]


pytestmark = pytest.mark.browser


def chromium_path() -> str | None:
    candidates = [os.environ.get("CHROMIUM"), "chromium", "chromium-browser", "google-chrome"]
    for candidate in filter(None, candidates):
        found = shutil.which(candidate)
        if found:
            return found
    return None


class DevTools:
    """A headless Chromium and a DevTools-protocol session over --remote-debugging-pipe
    (fd 3: commands in, fd 4: replies out; messages are JSON separated by NUL bytes)."""

    def __init__(self, executable: str, profile: Path, timeout: float = 60.0) -> None:
        commands_r, commands_w = os.pipe()
        replies_r, replies_w = os.pipe()

        def wire_pipes() -> None:  # in the child, before exec: the pipes become fds 3 and 4
            commands, replies = os.dup(commands_r), os.dup(replies_w)
            os.dup2(commands, 3)
            os.dup2(replies, 4)

        self._stderr = tempfile.TemporaryFile()
        self.process = subprocess.Popen(
            [executable, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--remote-debugging-pipe", "about:blank"],
            pass_fds=(3, 4),
            preexec_fn=wire_pipes,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._stderr,
        )
        os.close(commands_r)
        os.close(replies_w)
        self._out = os.fdopen(commands_w, "wb", buffering=0)
        self._in = os.fdopen(replies_r, "rb", buffering=0)
        self._buffer = b""
        self._next_id = 0
        self._timeout = timeout
        self.session: str | None = None

    def _message(self) -> dict:
        while b"\0" not in self._buffer:
            chunk = self._in.read(1 << 16)
            if not chunk:
                self._stderr.seek(0)
                raise RuntimeError(f"Chromium closed the pipe:\n{self._stderr.read().decode(errors='replace')[-3000:]}")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def send(self, method: str, params: dict | None = None) -> dict:
        self._next_id += 1
        command = {"id": self._next_id, "method": method, "params": params or {}}
        if self.session and not method.startswith(("Target.", "Browser.")):
            command["sessionId"] = self.session
        self._out.write(json.dumps(command).encode() + b"\0")
        while True:
            message = self._message()
            if message.get("id") == self._next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]

    def open_page(self, url: str) -> None:
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.send("Page.enable")
        self.send("Page.navigate", {"url": url})

    def evaluate(self, expression: str):
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in result:
            return None
        return result["result"].get("value")

    def wait_for(self, expression: str, what: str):
        deadline = time.monotonic() + self._timeout
        while time.monotonic() < deadline:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(0.25)
        raise AssertionError(f"timed out after {self._timeout:.0f}s waiting for {what}")

    def screenshot(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(self.send("Page.captureScreenshot", {"format": "png"})["data"]))

    def close(self) -> None:
        try:
            self.send("Browser.close")
        except (RuntimeError, OSError):
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._out.close()
        self._in.close()
        self._stderr.close()


# The lineage as the page drew it: the cytoscape instance dbt docs renders into `#cy`.
RENDERED_GRAPH_JS = """
(() => {
    const container = document.querySelector('#cy');
    if (!container || !container._cyreg || !container._cyreg.cy) return null;
    const cy = container._cyreg.cy;
    if (cy.nodes().length === 0) return null;
    const box = container.getBoundingClientRect();
    return JSON.stringify({
        container: {width: box.width, height: box.height},
        nodes: cy.nodes().map(n => ({
            id: n.id(), label: n.data('label'), x: n.position('x'), visible: n.visible(),
        })),
        edges: cy.edges().map(e => ({source: e.source().id(), target: e.target().id()})),
        title: (document.querySelector('h1') || {}).innerText || '',
    });
})()
"""


@pytest.fixture(scope="module")
def docs_site(dbt, tmp_path_factory) -> Path:
    """`make docs` on a temporary target: the manifest from `dbt parse`, then the static site.
    --no-compile: the models' SQL is rendered from the raw files at execute time, and the lineage
    comes from the parsed refs and sources; --empty-catalog: no warehouse needed for the page."""
    landing = tmp_path_factory.mktemp("docs_landing")
    schema = "docs_site"
    assert dbt("parse", landing=landing, schema=schema).success
    result = dbt("docs", "generate", "--static", "--no-compile", "--empty-catalog", landing=landing, schema=schema)
    assert result.success, result.exception
    site = dbt._work / schema / "static_index.html"  # helpers.dbt_runner.Dbt: --target-path <work>/<schema>
    assert site.is_file(), f"dbt docs generate --static wrote no {site}"
    return site


@pytest.fixture(scope="module")
def rendered_lineage(docs_site, tmp_path_factory) -> Iterator[dict]:
    executable = chromium_path()
    if executable is None:
        pytest.skip(
            "Chromium is not installed: `apt-get install chromium` (Debian), or set CHROMIUM=<path>. "
            "`make`/CI install it, so this only skips on a machine without it."
        )
    browser = DevTools(executable, tmp_path_factory.mktemp("chromium-profile"))
    try:
        # The model page with its full-screen lineage graph: +dim_customer+ (all ancestors, children).
        browser.open_page(f"{docs_site.as_uri()}#!/model/{LINEAGE[-1]}?g_v=1&g_i=%2Bdim_customer%2B")
        graph = json.loads(browser.wait_for(RENDERED_GRAPH_JS, "the lineage graph of dim_customer"))
        browser.wait_for("document.fonts.status === 'loaded'", "fonts")
        time.sleep(1.0)  # the graph's layout animation
        browser.screenshot(SCREENSHOT)
        yield graph
    finally:
        browser.close()


def reachable(edges: list[dict], start: str) -> set[str]:
    children: dict[str, list[str]] = {}
    for edge in edges:
        children.setdefault(edge["source"], []).append(edge["target"])
    seen, stack = set(), [start]
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in seen:
                seen.add(child)
                stack.append(child)
    return seen


def test_lineage_shows_source_staging_current_state_snapshot_mart(rendered_lineage):
    nodes = {node["id"]: node for node in rendered_lineage["nodes"]}
    missing = [unique_id for unique_id in LINEAGE if unique_id not in nodes]
    assert not missing, f"not in the rendered lineage of dim_customer: {missing} (shown: {sorted(nodes)})"
    assert all(nodes[unique_id]["visible"] for unique_id in LINEAGE)
    assert [nodes[unique_id]["label"] for unique_id in LINEAGE] == [
        "crm.customer_master",
        "stg_crm__customer_master",
        "crm__customer_master",
        "customer_snapshot",
        "dim_customer",
    ]
    for upstream, downstream in zip(LINEAGE, LINEAGE[1:], strict=False):
        assert downstream in reachable(rendered_lineage["edges"], upstream), f"no path {upstream} -> {downstream}"
    # Drawn left to right in flow order.
    positions = [nodes[unique_id]["x"] for unique_id in LINEAGE]
    assert positions == sorted(positions) and len(set(positions)) == len(positions), positions
    assert rendered_lineage["container"]["width"] > 600 and rendered_lineage["container"]["height"] > 300
    assert rendered_lineage["title"].startswith("dim_customer")


def test_lineage_reaches_the_exposures(rendered_lineage):
    shown = {node["id"] for node in rendered_lineage["nodes"]}
    assert "exposure.cdc_lakehouse.customer_history_notebook" in shown
    assert "exposure.cdc_lakehouse.customer_history_notebook" in reachable(rendered_lineage["edges"], LINEAGE[0])


def test_screenshot_saved(rendered_lineage):
    data = SCREENSHOT.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 20_000, f"{SCREENSHOT}: {len(data)} bytes"


def test_every_source_model_snapshot_seed_and_column_is_described(docs_site):
    coverage = docs_coverage_gaps(docs_site.parent)
    assert coverage.ok, "\n".join(coverage.gaps)
