"""/langgraph's meta routes, read-only assistants, the 501s for routes not served, the
paging headers of searches and CORS, through Django's test client (no live server: none of
it depends on the store's provider; the differential test compares them with langgraph dev).
"""

from __future__ import annotations

import json
import re
import uuid
from importlib import metadata

import langgraph.version
import pytest
from django.contrib.auth.models import User
from rest_framework.authtoken.models import Token

from checkpoints.langgraph_api.unsupported import ROUTES

pytestmark = pytest.mark.django_db

GRAPHS = {
    "agent": "tests.checkpoints.langgraph_api.graphs:builder",
    "nested": "tests.checkpoints.langgraph_api.graphs:nested_builder",
}
NAMESPACE = uuid.UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8")
AGENT = str(uuid.uuid5(NAMESPACE, "agent"))
NESTED = str(uuid.uuid5(NAMESPACE, "nested"))


@pytest.fixture
def api(client, settings):
    settings.CHECKPOINTS = {**settings.CHECKPOINTS, "GRAPHS": GRAPHS}
    user = User.objects.create_user("alice", password="pw")
    key = Token.objects.create(user=user).key

    class Api:
        def get(self, path, auth=True, **extra):
            headers = {"HTTP_X_API_KEY": key} if auth else {}
            return client.get(f"/langgraph{path}", **headers, **extra)

        def post(self, path, body=None, auth=True, content_type="application/json", **extra):
            headers = {"HTTP_X_API_KEY": key} if auth else {}
            data = json.dumps(body if body is not None else {})
            return client.generic(
                "POST", f"/langgraph{path}", data, content_type, **headers, **extra
            )

        def send(self, method, path, **extra):
            return client.generic(method, f"/langgraph{path}", HTTP_X_API_KEY=key, **extra)

    return Api()


# --- meta -------------------------------------------------------------------------------


def test_ok_and_info_answer_without_credentials(api):
    for path in ("/ok", "/"):
        r = api.get(path, auth=False)
        assert r.status_code == 200 and r.json() == {"ok": True, "services": {}}
    info = api.get("/info", auth=False)
    assert info.status_code == 200
    body = info.json()
    assert body["version"] == metadata.version("checkpoint-store")
    assert body["langgraph_py_version"] == langgraph.version.__version__
    assert body["flags"]["assistants"] is True and body["flags"]["crons"] is False
    assert set(body["flags"]) == {
        "assistants",
        "crons",
        "langsmith",
        "langsmith_tracing_replicas",
        "langsmith_tracing_session_on_runs",
    }
    assert body["host"]["kind"] == "self-hosted"
    assert set(body["host"]) == {
        "kind",
        "project_id",
        "host_revision_id",
        "revision_id",
        "tenant_id",
    }


# --- assistants -------------------------------------------------------------------------


def test_assistants_need_credentials(api):
    assert api.post("/assistants/search", auth=False).status_code == 401
    assert api.get(f"/assistants/{AGENT}", auth=False).status_code == 401


def test_one_system_assistant_per_registered_graph(api):
    r = api.post("/assistants/search", {})
    assert r.status_code == 200
    found = r.json()
    # Newest first, as the Platform lists them: the graph registered last.
    assert [a["graph_id"] for a in found] == ["nested", "agent"]
    agent = found[1]
    assert agent["assistant_id"] == AGENT and found[0]["assistant_id"] == NESTED
    assert agent["name"] == "agent"
    assert agent["metadata"] == {"created_by": "system"}
    assert agent["config"] == {} and agent["context"] == {}
    assert agent["version"] == 1 and agent["description"] is None
    assert agent["created_at"] == agent["updated_at"]
    assert r["X-Pagination-Total"] == "2" and "X-Pagination-Next" not in r
    assert api.get(f"/assistants/{AGENT}").json() == agent
    assert api.post("/assistants/count", {}).json() == 2


def test_assistant_search_filters_pages_sorts_and_selects(api):
    first = api.post("/assistants/search", {"limit": 1})
    assert len(first.json()) == 1
    assert first["X-Pagination-Total"] == "2" and first["X-Pagination-Next"] == "1"
    last = api.post("/assistants/search", {"limit": 1, "offset": 1})
    assert last["X-Pagination-Total"] == "2" and "X-Pagination-Next" not in last
    agent = api.post("/assistants/search", {"graph_id": "agent"}).json()
    assert [a["graph_id"] for a in agent] == ["agent"]
    assert [a["name"] for a in api.post("/assistants/search", {"name": "NEST"}).json()] == [
        "nested"
    ]
    assert api.post("/assistants/search", {"metadata": {"created_by": "someone"}}).json() == []
    assert len(api.post("/assistants/search", {"metadata": {"created_by": "system"}}).json()) == 2
    ordered = api.post("/assistants/search", {"sort_by": "name", "sort_order": "asc"}).json()
    assert [a["name"] for a in ordered] == ["agent", "nested"]
    picked = api.post("/assistants/search", {"select": ["assistant_id", "name"]}).json()
    assert all(set(a) == {"assistant_id", "name"} for a in picked)
    assert api.post("/assistants/count", {"graph_id": "nested"}).json() == 1
    missing = api.post("/assistants/search", {"graph_id": "nope"})
    assert missing.status_code == 404 and "nope" in missing.json()["detail"]
    for body, name in (
        ({"select": ["secret"]}, "select"),
        ({"limit": "x"}, "limit"),
        ({"sort_by": "size"}, "sort_by"),
    ):
        r = api.post("/assistants/search", body)
        assert r.status_code == 422 and r.json()["field"] == name, r.json()


def test_a_text_plain_body_is_read_as_json(api):
    # LangGraph Studio posts its JSON bodies as text/plain.
    r = api.post("/assistants/search", {"limit": 1}, content_type="text/plain;charset=UTF-8")
    assert r.status_code == 200 and len(r.json()) == 1
    r = api.post("/threads/search", {"limit": 1}, content_type="text/plain")
    assert r.status_code == 200
    bad = api.send("POST", "/assistants/search", data=b"{", content_type="text/plain")
    assert bad.status_code == 422


def test_assistant_ids_are_uuids_and_unknown_ones_are_404(api):
    r = api.get("/assistants/agent")
    assert r.status_code == 422 and r.json()["field"] == "assistant_id"
    r = api.get(f"/assistants/{uuid.uuid4()}")
    assert r.status_code == 404 and "agent, nested" in r.json()["detail"]
    assert api.get("/assistants/agent/schemas").status_code == 422


def test_the_graph_drawing(api):
    drawn = api.get(f"/assistants/{AGENT}/graph").json()
    assert [n["id"] for n in drawn["nodes"]] == ["__start__", "plan", "write", "review", "__end__"]
    assert {"source": "plan", "target": "write"} in drawn["edges"]
    # The node data keeps its name, not the runnable's import path.
    assert drawn["nodes"][1]["data"] == {"name": "plan"}
    # The graph id stands for its assistant here, as on the Platform.
    assert api.get("/assistants/agent/graph").json() == drawn
    flat = api.get(f"/assistants/{NESTED}/graph").json()
    deep = api.get(f"/assistants/{NESTED}/graph?xray=true").json()
    assert "inner:ask" not in [n["id"] for n in flat["nodes"]]
    assert "inner:ask" in [n["id"] for n in deep["nodes"]]
    assert api.get(f"/assistants/{NESTED}/graph?xray=1").json() == deep
    for bad in ("0", "-1", "deep"):
        r = api.get(f"/assistants/{NESTED}/graph?xray={bad}")
        assert r.status_code == 422 and r.json()["field"] == "xray", bad


def test_schemas_and_subgraphs(api):
    body = api.get(f"/assistants/{AGENT}/schemas").json()
    assert body["graph_id"] == "agent"
    assert set(body) == {
        "graph_id",
        "input_schema",
        "output_schema",
        "state_schema",
        "config_schema",
        "context_schema",
    }
    assert set(body["input_schema"]["properties"]) == {"topic", "notes", "approved"}
    assert body["input_schema"]["title"] == "State"
    # The state schema is named after the graph id, as the Platform names a default graph.
    assert body["state_schema"]["title"] == "agent_state"
    assert body["state_schema"]["properties"]["notes"]["default"] is None
    assert body["config_schema"] == {} and body["context_schema"] is None
    subgraphs = api.get(f"/assistants/{NESTED}/subgraphs").json()
    assert list(subgraphs) == ["inner"]
    assert set(subgraphs["inner"]["input_schema"]["properties"]) == {"topic", "notes"}
    assert "graph_id" not in subgraphs["inner"]
    assert api.get(f"/assistants/{NESTED}/subgraphs/inner").json() == subgraphs
    assert api.get(f"/assistants/{NESTED}/subgraphs/other").json() == {}
    assert api.get(f"/assistants/{AGENT}/subgraphs?recurse=true").json() == {}


def test_versions(api):
    r = api.post(f"/assistants/{AGENT}/versions", {})
    assert r.status_code == 200
    (version,) = r.json()
    assert version["assistant_id"] == AGENT and version["version"] == 1
    assert set(version) == {
        "assistant_id",
        "version",
        "graph_id",
        "config",
        "context",
        "metadata",
        "created_at",
        "name",
        "description",
    }
    none = api.post(f"/assistants/{AGENT}/versions", {"metadata": {"created_by": "me"}})
    assert none.status_code == 404


def test_no_graph_registered_means_no_assistants(api, settings):
    settings.CHECKPOINTS = {**settings.CHECKPOINTS, "GRAPHS": {}}
    r = api.post("/assistants/search", {})
    assert r.json() == [] and r["X-Pagination-Total"] == "0"
    assert api.get(f"/assistants/{AGENT}").status_code == 404


# --- routes not served --------------------------------------------------------------------


def _concrete(path: str) -> str:
    return re.sub(r"\{[a-z_]+\}", lambda m: "a/b" if m[0] == "{thread_id}" else "x-1", path)


def test_every_platform_route_not_served_is_a_501(api):
    assert len(ROUTES) > 30
    for methods, path in ROUTES:
        for method in methods:
            r = api.send(method, "/" + _concrete(path))
            assert r.status_code == 501, (method, path, r.content)
            body = r.json()
            assert body["code"] == "not_served"
            assert "not part of this server" in body["detail"] and method in body["detail"]


def test_assistant_writes_are_501s(api):
    assert api.post("/assistants", {"graph_id": "agent"}).status_code == 501
    assert api.send("PATCH", f"/assistants/{AGENT}").status_code == 501
    assert api.send("DELETE", f"/assistants/{AGENT}").status_code == 501
    assert api.post(f"/assistants/{AGENT}/latest", {"version": 1}).status_code == 501
    # Nothing changed.
    assert api.get(f"/assistants/{AGENT}").status_code == 200


def test_a_path_that_is_no_platform_route_is_a_404_and_a_wrong_method_a_405(api):
    for path in ("/crons", "/nothing/here", "/runs/crons/x/y", "/store"):
        r = api.post(path)
        assert r.status_code == 404 and r.json()["code"] == "not_found", path
    r = api.send("GET", "/runs/wait")
    assert r.status_code == 405 and r["Allow"] == "POST"
    r = api.send("PUT", "/threads/a/runs")
    assert r.status_code == 405 and r["Allow"] == "GET, POST"


def test_the_sdk_sees_a_501_for_runs(api, live_server, settings):
    from langgraph_sdk import get_sync_client

    key = Token.objects.get(user__username="alice").key
    client = get_sync_client(url=f"{live_server.url}/langgraph", api_key=key)
    with pytest.raises(Exception) as caught:
        client.runs.wait("x", "agent", input={})
    assert caught.value.response.status_code == 501
    assert "not part of this server" in caught.value.response.json()["detail"]
    with pytest.raises(Exception) as caught:
        client.store.put_item(["a"], "k", {"v": 1})
    assert caught.value.response.status_code == 501


# --- paging headers -----------------------------------------------------------------------


def test_thread_search_sends_the_platform_paging_headers(api, settings):
    for n in range(3):
        assert api.post("/threads", {"thread_id": f"page-{n}"}).status_code == 200
    # Staff-only create on a store without owners is another test's subject: alice made
    # these on the default (owner-recording) store.
    r = api.post("/threads/search", {"limit": 2})
    assert len(r.json()) == 2
    assert r["X-Pagination-Total"] == "3" and r["X-Pagination-Next"] == "2"
    r = api.post("/threads/search", {"limit": 2, "offset": 2})
    assert len(r.json()) == 1
    assert r["X-Pagination-Total"] == "3" and "X-Pagination-Next" not in r
    r = api.post("/threads/search", {"limit": 10})
    assert r["X-Pagination-Total"] == "3" and "X-Pagination-Next" not in r


# --- CORS ---------------------------------------------------------------------------------

STUDIO = "https://smith.langchain.com"


def preflight(client, origin, **extra):
    return client.options(
        "/langgraph/threads/search",
        HTTP_ORIGIN=origin,
        HTTP_ACCESS_CONTROL_REQUEST_METHOD="POST",
        HTTP_ACCESS_CONTROL_REQUEST_HEADERS="content-type, x-api-key",
        **extra,
    )


def test_cors_is_off_by_default(client, settings):
    assert settings.CORS_ALLOWED_ORIGINS == []
    r = preflight(client, STUDIO)
    # A preflight needs no credentials, but no origin is allowed: the browser refuses.
    assert r.status_code == 200
    assert "Access-Control-Allow-Origin" not in r


def test_a_listed_origin_passes_the_preflight_and_reads_the_paging_headers(client, api, settings):
    settings.CORS_ALLOWED_ORIGINS = [STUDIO]
    r = preflight(client, STUDIO, HTTP_ACCESS_CONTROL_REQUEST_PRIVATE_NETWORK="true")
    assert r.status_code == 200
    assert r["Access-Control-Allow-Origin"] == STUDIO
    assert "x-api-key" in r["Access-Control-Allow-Headers"]
    assert "POST" in r["Access-Control-Allow-Methods"]
    # Chrome's Private Network Access: a public page may call this server on a private address.
    assert r["Access-Control-Allow-Private-Network"] == "true"
    # No cookies cross origins.
    assert "Access-Control-Allow-Credentials" not in r
    other = preflight(client, "https://elsewhere.example")
    assert "Access-Control-Allow-Origin" not in other
    answer = api.post("/threads/search", {}, HTTP_ORIGIN=STUDIO)
    assert answer["Access-Control-Allow-Origin"] == STUDIO
    exposed = {h.strip().lower() for h in answer["Access-Control-Expose-Headers"].split(",")}
    assert exposed == {"x-pagination-total", "x-pagination-next", "content-location"}


def test_cors_covers_the_langgraph_api_alone(client, settings):
    settings.CORS_ALLOWED_ORIGINS = [STUDIO]
    r = client.options(
        "/api/threads/", HTTP_ORIGIN=STUDIO, HTTP_ACCESS_CONTROL_REQUEST_METHOD="GET"
    )
    assert "Access-Control-Allow-Origin" not in r
