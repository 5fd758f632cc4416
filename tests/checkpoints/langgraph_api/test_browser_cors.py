"""A page on another origin calls /langgraph/threads/search from Chromium with x-api-key,
as LangGraph Studio (or any web client) does: it works with the page's origin listed in
CORS_ALLOWED_ORIGINS (CHECKPOINTS_CORS_ORIGINS), reading the paging headers, and the browser
blocks it with CORS off."""

from __future__ import annotations

import functools
import http.server
import threading

import pytest

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

PAGE = """<!doctype html>
<html><body><p id="state">calling</p><script>
const params = new URLSearchParams(location.search);
fetch(params.get("api") + "/threads/search", {
  method: "POST",
  headers: {"x-api-key": params.get("key"), "content-type": "application/json"},
  body: JSON.stringify({limit: 1}),
}).then(async (r) => {
  window.__result = {
    status: r.status,
    total: r.headers.get("X-Pagination-Total"),
    next: r.headers.get("X-Pagination-Next"),
    body: await r.json(),
  };
}).catch((e) => { window.__result = {error: String(e)}; });
</script></body></html>
"""


@pytest.fixture
def other_origin(tmp_path):
    """A tiny static server on a spare loopback port: another origin than the service."""
    (tmp_path / "index.html").write_text(PAGE)

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Quiet, directory=str(tmp_path))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def call_from(browser, origin: str, api: str, key: str) -> dict:
    context = browser.new_context()
    try:
        tab = context.new_page()
        tab.goto(f"{origin}/index.html?api={api}&key={key}")
        tab.wait_for_function("window.__result !== undefined", timeout=15_000)
        return tab.evaluate("window.__result")
    finally:
        context.close()


@pytest.mark.parametrize("lg", ["sqlite"], indirect=True)
def test_a_page_on_another_origin_searches_threads_only_with_cors_on(
    lg, browser, other_origin, settings
):
    client = lg.sync("alice")
    for _ in range(2):
        client.threads.create(metadata={"from": "browser-test"})
    api, key = lg.url, lg.tokens["alice"]
    # The service's own origin is another one than the page's.
    assert not api.startswith(other_origin)

    settings.CORS_ALLOWED_ORIGINS = []
    blocked = call_from(browser, other_origin, api, key)
    assert "error" in blocked and "Failed to fetch" in blocked["error"], blocked

    settings.CORS_ALLOWED_ORIGINS = [other_origin]
    done = call_from(browser, other_origin, api, key)
    assert done.get("status") == 200, done
    assert len(done["body"]) == 1 and done["body"][0]["metadata"] == {"from": "browser-test"}
    # The paging headers are exposed to the page, as Studio reads them.
    assert done["total"] == "2" and done["next"] == "1"

    # Another origin than the listed one is still refused.
    settings.CORS_ALLOWED_ORIGINS = ["https://smith.langchain.com"]
    again = call_from(browser, other_origin, api, key)
    assert "error" in again, again
