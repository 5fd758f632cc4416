"""/ok, /info, assistants and the searches' paging headers against `langgraph dev`.

The same langgraph.json graphs on both servers (tests/.../graphs.py: ``agent`` and
``nested``), the same calls through langgraph_sdk (or raw HTTP where the SDK hides the
headers), answers compared after removing timestamps (and thread ids). Deliberate
differences, not compared: /info's ``version`` (each server's own) and its tracing flags
(no crons, no LangSmith here); auth (the dev server has none).
"""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

import httpx
import pytest
from langgraph_sdk import get_sync_client

from tests.langgraph_dev import running_dev_server, same_shape

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

GRAPHS = {
    "agent": "tests.checkpoints.langgraph_api.graphs:builder",
    "nested": "tests.checkpoints.langgraph_api.graphs:nested_builder",
}
NAMESPACE = uuid.UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8")


@pytest.fixture(scope="module")
def dev_server(tmp_path_factory):
    """`langgraph dev` serving the same two graphs as GRAPHS registers here."""
    folder = tmp_path_factory.mktemp("langgraph-dev-meta")
    shutil.copy(Path(__file__).parent / "graphs.py", folder / "graphs.py")
    (folder / "langgraph.json").write_text(
        json.dumps(
            {
                "dependencies": ["."],
                "graphs": {"agent": "./graphs.py:graph", "nested": "./graphs.py:nested"},
            }
        )
    )
    with running_dev_server(folder) as url:
        yield url


@pytest.fixture
def both(lg, dev_server, settings):
    settings.CHECKPOINTS = {**settings.CHECKPOINTS, "GRAPHS": GRAPHS}
    return {
        "ours": (lg.sync(lg.owner()), lg.url, {"x-api-key": lg.tokens[lg.owner()]}),
        "theirs": (get_sync_client(url=dev_server, api_key=None), dev_server, {}),
    }


def each(both, call):
    """``call(client, url, headers)`` on ours, then theirs."""
    return [call(*both[side]) for side in ("ours", "theirs")]


@pytest.mark.parametrize("lg", ["sqlite"], indirect=True)
def test_same_meta_answers(both):
    ours, theirs = each(both, lambda c, url, h: httpx.get(f"{url}/ok").json())
    assert ours == theirs == {"ok": True, "services": {}}
    ours, theirs = each(both, lambda c, url, h: httpx.get(f"{url}/info").json())
    assert set(ours) == set(theirs)
    assert ours["langgraph_py_version"] == theirs["langgraph_py_version"]
    assert set(ours["flags"]) == set(theirs["flags"])
    assert ours["flags"]["assistants"] is theirs["flags"]["assistants"] is True
    assert ours["host"] == theirs["host"]


@pytest.mark.parametrize("lg", ["sqlite"], indirect=True)
def test_same_assistants(both):
    ours, theirs = each(both, lambda c, url, h: c.assistants.search())
    assert [a["graph_id"] for a in ours] == [a["graph_id"] for a in theirs]
    assert same_shape(ours, theirs) == []
    # The ids are LangGraph's own derivation, equal on both.
    assert {a["assistant_id"] for a in ours} == {
        str(uuid.uuid5(NAMESPACE, name)) for name in GRAPHS
    }
    assert [a["assistant_id"] for a in ours] == [a["assistant_id"] for a in theirs]
    for graph_id in GRAPHS:
        assistant_id = str(uuid.uuid5(NAMESPACE, graph_id))
        calls = [
            ("get", (assistant_id,), {}),
            ("get_graph", (assistant_id,), {}),
            ("get_graph", (assistant_id,), {"xray": True}),
            ("get_graph", (assistant_id,), {"xray": 1}),
            ("get_graph", (graph_id,), {}),
            ("get_schemas", (assistant_id,), {}),
            ("get_subgraphs", (assistant_id,), {}),
            ("get_subgraphs", (assistant_id,), {"recurse": True}),
            ("get_subgraphs", (assistant_id,), {"namespace": "inner"}),
            ("get_versions", (assistant_id,), {}),
            ("search", (), {"graph_id": graph_id}),
            ("count", (), {"graph_id": graph_id}),
        ]
        for name, args, kwargs in calls:
            ours, theirs = each(
                both,
                lambda c, url, h, name=name, args=args, kwargs=kwargs: getattr(c.assistants, name)(
                    *args, **kwargs
                ),
            )
            assert same_shape(ours, theirs) == [], (graph_id, name, kwargs, ours, theirs)


@pytest.mark.parametrize("lg", ["sqlite"], indirect=True)
def test_same_assistant_search_paging_filters_and_refusals(both):
    def search(body, content_type="application/json"):
        def call(c, url, headers):
            r = httpx.post(
                f"{url}/assistants/search",
                content=json.dumps(body),
                headers={**headers, "Content-Type": content_type},
            )
            return (
                r.status_code,
                r.headers.get("x-pagination-total"),
                r.headers.get("x-pagination-next"),
                [a.get("graph_id") for a in r.json()] if r.status_code == 200 else None,
            )

        return each(both, call)

    for body in (
        {},
        {"limit": 1},
        {"limit": 1, "offset": 1},
        {"limit": 5, "offset": 3},
        {"name": "NEST"},
        {"metadata": {"created_by": "system"}},
        {"metadata": {"created_by": "me"}},
        {"sort_by": "name", "sort_order": "asc"},
        {"sort_by": "graph_id", "sort_order": "desc"},
    ):
        ours, theirs = search(body)
        assert ours == theirs, body
    # Studio's text/plain bodies, read as JSON on both.
    ours, theirs = search({"limit": 1}, "text/plain;charset=UTF-8")
    assert ours == theirs and ours[0] == 200
    # Refusals: an unknown graph is a 404, a bad xray or a graph id where a UUID belongs 422.
    ours, theirs = search({"graph_id": "nope"})
    assert ours[0] == theirs[0] == 404
    agent = str(uuid.uuid5(NAMESPACE, "agent"))
    for path in (
        f"/assistants/{agent}/graph?xray=0",
        f"/assistants/{agent}/graph?xray=deep",
        "/assistants/agent/schemas",
        "/assistants/agent",
        f"/assistants/{uuid.uuid4()}",
    ):
        ours, theirs = each(
            both, lambda c, url, h, path=path: httpx.get(f"{url}{path}", headers=h).status_code
        )
        assert ours == theirs, path


@pytest.mark.parametrize("lg", ["sqlite"], indirect=True)
def test_same_thread_search_paging_headers(both):
    tag = uuid.uuid4().hex

    def make(c, url, headers):
        for _ in range(3):
            c.threads.create(metadata={"page": tag})

    each(both, make)
    for limit, offset in ((2, 0), (2, 2), (3, 0), (10, 0), (1, 5)):

        def call(c, url, headers, limit=limit, offset=offset):
            r = httpx.post(
                f"{url}/threads/search",
                json={"metadata": {"page": tag}, "limit": limit, "offset": offset},
                headers=headers,
            )
            return (
                len(r.json()),
                r.headers.get("x-pagination-total"),
                r.headers.get("x-pagination-next"),
            )

        ours, theirs = each(both, call)
        assert ours == theirs, (limit, offset)
