"""Browser fixtures: Debian's Chromium (/usr/bin/chromium) driven by Playwright, one browser
per test module, never a browser Playwright downloads; screenshots in one folder per run."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# The folder this run's screenshots went to; the session's summary prints it.
SHOTS: list[Path] = []


@pytest.fixture(scope="session")
def screenshots(tmp_path_factory) -> Path:
    """$CHECKPOINTS_TEST_OUTPUT/screenshots when set, else <pytest basetemp>/screenshots."""
    base = os.environ.get("CHECKPOINTS_TEST_OUTPUT")
    folder = (Path(base) if base else tmp_path_factory.getbasetemp()) / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    if folder not in SHOTS:
        SHOTS.append(folder)
    return folder


@pytest.fixture
def shot(screenshots):
    """``shot(page, name)``: a full-page screenshot saved as <name>.png."""

    def take(page, name: str) -> Path:
        path = screenshots / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        assert path.stat().st_size > 0
        return path

    return take


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium")
    # Playwright's sync API keeps an event loop on this thread for as long as the browser
    # lives; the tests' ORM calls between browser steps are plain synchronous calls.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as pw:
            launched = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            yield launched
            launched.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def page(browser, live_server, transactional_db):
    """A tab logged in to the admin as a superuser; ``page.base`` is the server's URL."""
    from django.contrib.auth import get_user_model

    get_user_model().objects.create_superuser("root", "root@example.com", "pw-root-123")
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    tab.set_default_timeout(15_000)
    tab.goto(f"{live_server.url}/admin/login/")
    tab.fill("#id_username", "root")
    tab.fill("#id_password", "pw-root-123")
    tab.click("input[type=submit]")
    tab.wait_for_selector("#site-name")
    tab.base = live_server.url
    yield tab
    context.close()


# Recorded by the page itself: an init script runs before the page's own, outside its CSP.
CSP_LISTENER = """
window.__csp = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__csp.push(`${e.violatedDirective} ${e.blockedURI}`);
});
"""


def watch_csp(page) -> None:
    """Have every page this tab opens record its CSP violations (read by `csp_violations`)."""
    page.context.add_init_script(CSP_LISTENER)


def csp_violations(page) -> list[str]:
    """The CSP violations the current page recorded since it loaded."""
    return page.evaluate("window.__csp")
