"""A tiny browser task for tests: hand-written pages on a fake origin, done when the page says so."""

from __future__ import annotations

import importlib.util
import shutil

import pytest

from turngym.envs.browser.env import BrowserEnv, Tab, Validation

ORIGIN = "http://test.turngym"
OTHER_ORIGIN = "http://other.turngym"


def browser_missing() -> str | None:
    if importlib.util.find_spec("playwright") is None:
        return "playwright is not installed"
    if not (shutil.which("chromium-headless-shell") or shutil.which("chromium")):
        return "no Chromium on this machine (apt-get install chromium-headless-shell)"
    return None


#: what a test that drives a real Chromium carries (a whole module: ``pytestmark = BROWSER_MARKS``):
#: the ``browser`` marker, which ``make test-fast`` deselects, and a skip where there is none here
BROWSER_MARKS = [
    pytest.mark.browser,
    pytest.mark.skipif(browser_missing() is not None, reason=str(browser_missing())),
]


def needs_browser(test):
    for mark in BROWSER_MARKS:
        test = mark(test)
    return test


FORM_PAGE = """<!DOCTYPE html><html><head><title>Form</title></head><body>
<h1>Test form</h1>
<input id="name" aria-label="Name">
<select id="fruit" aria-label="Fruit"><option value="a">Apple</option><option value="b">Banana</option></select>
<button id="go" onclick="document.getElementById('out').textContent = 'clicked ' +
  document.getElementById('name').value + ' ' + document.getElementById('fruit').value">Go</button>
<p id="out">nothing yet</p>
<input id="keys" aria-label="Keys" onkeydown="if (event.key === 'Enter') window.__done = true">
<a href="/second">Second page</a>
<iframe id="frame" srcdoc="<button onclick='this.textContent=&quot;pressed&quot;'>Inner</button>"></iframe>
<div style="height: 3000px">tall</div>
<p>bottom</p>
</body></html>"""

SECOND_PAGE = """<!DOCTYPE html><html><body><h2>Second</h2><a href="/">Back home</a></body></html>"""

HANG_PAGE = """<!DOCTYPE html><html><body>
<button onclick="while (true) {}">Hang</button><button onclick="this.textContent='ok'">Fine</button>
</body></html>"""


class PagesTask:
    """Serves ``pages`` (path -> HTML); the episode ends when ``window.__done`` is set."""

    hide_selectors: tuple[str, ...] = ()
    viewport = {"width": 640, "height": 480}
    origins = (ORIGIN, OTHER_ORIGIN)
    name = "pages"

    def __init__(self, pages: dict[str, str]):
        self.pages = pages  # paths on ORIGIN; "other:/path" is a page of OTHER_ORIGIN

    def task_ids(self, split: str) -> list[str]:
        return ["pages/0", "pages/1"]

    def get_task(self, task_id: str) -> dict:
        return {"task_id": task_id}

    def instructions(self) -> str:
        return "Test pages."

    async def configure(self, context) -> None:
        return None

    async def serve(self, route) -> None:
        url = route.request.url
        if url.startswith(OTHER_ORIGIN):
            path = "other:" + (url[len(OTHER_ORIGIN) :].split("?")[0] or "/")
        else:
            path = url[len(ORIGIN) :].split("?")[0] or "/"
        body = self.pages.get(path)
        if body is None:
            await route.fulfill(status=404, body="no", content_type="text/plain")
        else:
            await route.fulfill(status=200, body=body, content_type="text/html")

    async def setup(self, tab: Tab, task: dict) -> str:
        await tab.page.goto(ORIGIN + "/", wait_until="domcontentloaded")
        return "Press Enter in the Keys field."

    async def validate(self, tab: Tab, task: dict) -> Validation:
        done = await tab.page.evaluate("() => window.__done === true")
        return Validation(reward=1.0, done=True, success=True, components={"done": 1.0}) if done else Validation()

    async def expert_action(self, tab: Tab, task: dict) -> str:
        return "noop()"


def pages_env(pages: dict[str, str] | None = None, **kwargs) -> BrowserEnv:
    return BrowserEnv(PagesTask(pages or {"/": FORM_PAGE, "/second": SECOND_PAGE}), **kwargs)


def bid_of(obs: str, needle: str) -> str:
    """The bid on the first observation line containing ``needle``."""
    for line in obs.splitlines():
        if needle in line and line.strip().startswith("["):
            return line.strip()[1:].split("]")[0]
    raise AssertionError(f"{needle!r} not in observation:\n{obs}")
