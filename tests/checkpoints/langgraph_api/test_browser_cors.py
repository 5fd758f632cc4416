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
<html><body><p>another origin</p><script>
const params = new URLSearchParams(location.search);
// One call to the API as a browser client makes it; what the page could read of the answer.
window.call = async (method, path, body, type) => {
  const headers = {"x-api-key": params.get("key")};
  // Playwright hands None over as null: a call without a body.
  if (body != null) headers["content-type"] = type || "application/json";
  try {
    const r = await fetch(params.get("api") + path, {
      method, headers, body: body == null ? undefined : JSON.stringify(body),
    });
    return {
      status: r.status,
      total: r.headers.get("X-Pagination-Total"),
      next: r.headers.get("X-Pagination-Next"),
      body: await r.json(),
    };
  } catch (e) {
    return {error: String(e)};
  }
};
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


@pytest.fixture
def tab(browser, other_origin, lg):
    """A page of ``other_origin`` ready to call the service with alice's key."""
    context = browser.new_context()
    page = context.new_page()
    page.goto(f"{other_origin}/index.html?api={lg.url}&key={lg.tokens['alice']}")
    page.wait_for_function("typeof window.call === 'function'")
    yield page
    context.close()


def call(tab, method: str, path: str, body=None, content_type=None) -> dict:
    return tab.evaluate(
        "([m, p, b, t]) => window.call(m, p, b, t)", [method, path, body, content_type]
    )


@pytest.mark.parametrize("lg", ["sqlite"], indirect=True)
def test_a_page_on_another_origin_searches_threads_only_with_cors_on(
    lg, tab, other_origin, settings
):
    client = lg.sync("alice")
    for _ in range(2):
        client.threads.create(metadata={"from": "browser-test"})
    # The service's own origin is another one than the page's.
    assert not lg.url.startswith(other_origin)

    settings.CORS_ALLOWED_ORIGINS = []
    blocked = call(tab, "POST", "/threads/search", {"limit": 1})
    assert "Failed to fetch" in blocked.get("error", ""), blocked

    settings.CORS_ALLOWED_ORIGINS = [other_origin]
    done = call(tab, "POST", "/threads/search", {"limit": 1})
    assert done.get("status") == 200, done
    assert len(done["body"]) == 1 and done["body"][0]["metadata"] == {"from": "browser-test"}
    # The paging headers are exposed to the page, as Studio reads them.
    assert done["total"] == "2" and done["next"] == "1"

    # Another origin than the listed one is still refused.
    settings.CORS_ALLOWED_ORIGINS = ["https://smith.langchain.com"]
    again = call(tab, "POST", "/threads/search", {"limit": 1})
    assert "error" in again, again


@pytest.mark.parametrize("lg", ["sqlite"], indirect=True)
def test_the_calls_studio_makes_answer_from_another_origin(lg, tab, other_origin, settings):
    """List a graph's threads, open one, show its state and history, fork it by editing its
    state: Studio's calls, in its order, from a page on another origin."""
    settings.CORS_ALLOWED_ORIGINS = [other_origin]
    lg.run_graph("studio-1", topic="ask", owner="alice")
    assert call(tab, "GET", "/info")["body"]["flags"]["assistants"] is True
    # Studio posts its JSON bodies as text/plain.
    found = call(tab, "POST", "/assistants/search", {"limit": 100}, "text/plain;charset=UTF-8")
    assert found["status"] == 200 and found["total"] == "1", found
    (assistant,) = found["body"]
    aid = assistant["assistant_id"]
    assert call(tab, "GET", f"/assistants/{aid}")["body"]["graph_id"] == "agent"
    drawn = call(tab, "GET", f"/assistants/{aid}/graph?xray=true")["body"]
    assert "review" in [n["id"] for n in drawn["nodes"]]
    schemas = call(tab, "GET", f"/assistants/{aid}/schemas")["body"]
    assert "notes" in schemas["state_schema"]["properties"]
    assert call(tab, "GET", f"/assistants/{aid}/subgraphs?recurse=true")["body"] == {}
    threads = call(tab, "POST", "/threads/search", {"limit": 10}, "text/plain;charset=UTF-8")
    assert [t["thread_id"] for t in threads["body"]] == ["studio-1"]
    assert call(tab, "GET", "/threads/studio-1")["body"]["status"] == "interrupted"
    state = call(tab, "GET", "/threads/studio-1/state")["body"]
    assert state["next"] == ["review"]
    history = call(tab, "POST", "/threads/studio-1/history", {"limit": 10})["body"]
    assert len(history) > 1
    updated = call(
        tab,
        "POST",
        "/threads/studio-1/state",
        {"values": {"notes": ["edited"]}, "as_node": "write", "checkpoint": state["checkpoint"]},
    )
    assert updated["status"] == 200, updated
    assert "edited" in call(tab, "GET", "/threads/studio-1/state")["body"]["values"]["notes"]
    copied = call(tab, "POST", "/threads/studio-1/copy", {})
    assert copied["status"] == 200 and copied["body"]["thread_id"] != "studio-1"
    # Nothing Studio called answered with an error, and nothing was blocked.
