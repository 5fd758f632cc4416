"""The same SDK calls against `langgraph dev` (LangGraph's own server) and ours, compared.

`langgraph-cli[inmem]` pins packages our venv cannot hold (jsonschema-rs below schemathesis'
floor), so it lives in its own venv, made from PyPI on first use (LANGGRAPH_DEV_VENV names
another). It runs offline, on loopback, on a spare port, serving tests/.../graphs.py.

Deliberate differences, not compared: ids and timestamps; auth and owner isolation (the dev
server has none); a created thread holds one empty checkpoint here (the thread exists in
the store), none there, so history of an empty thread differs; keep_latest prune (the
in-memory server refuses it) and `before` paging (it answers 500) are tested in test_sdk.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.errors import NotFoundError, UnprocessableEntityError

from tests.private_servers import free_port

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

VENV = Path(
    os.environ.get(
        "LANGGRAPH_DEV_VENV", Path.home() / ".cache" / "checkpoint-store" / "langgraph-dev"
    )
)
HERE = Path(__file__).parent


def dev_venv() -> Path:
    binary = VENV / "bin" / "langgraph"
    if not binary.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run(
            [str(VENV / "bin" / "pip"), "install", "-q", "langgraph-cli[inmem]"], check=True
        )
    return binary


@pytest.fixture(scope="module")
def dev_server(tmp_path_factory):
    binary = dev_venv()
    folder = tmp_path_factory.mktemp("langgraph-dev")
    shutil.copy(HERE / "graphs.py", folder / "graphs.py")
    (folder / "langgraph.json").write_text(
        '{"dependencies": ["."], "graphs": '
        '{"agent": "./graphs.py:graph", "nested": "./graphs.py:nested"}}'
    )
    port = free_port()
    env = {**os.environ, "LANGSMITH_TRACING": "false", "LANGGRAPH_API_KEY": ""}
    proc = subprocess.Popen(
        [str(binary), "dev", "--port", str(port), "--host", "127.0.0.1", "--no-browser"],
        cwd=folder,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(240):
            try:
                if httpx.get(f"{url}/ok", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        else:
            pytest.fail("langgraph dev did not answer /ok")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


SKIP = {
    "thread_id",
    "created_at",
    "updated_at",
    "state_updated_at",
    "checkpoint_id",
    "id",
    "run_id",
}


def same_shape(ours, theirs, path="") -> list[str]:
    """Differences between two answers, field by field, ids and timestamps aside."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        out = []
        for key in sorted(set(ours) | set(theirs)):
            if key in SKIP:
                continue
            if key not in ours or key not in theirs:
                out.append(f"{path}.{key}: only in {'ours' if key in ours else 'theirs'}")
                continue
            out += same_shape(ours[key], theirs[key], f"{path}.{key}")
        return out
    if isinstance(ours, list) and isinstance(theirs, list):
        if len(ours) != len(theirs):
            return [f"{path}: {len(ours)} items vs {len(theirs)}"]
        return [
            d
            for i, (a, b) in enumerate(zip(ours, theirs, strict=True))
            for d in same_shape(a, b, f"{path}[{i}]")
        ]
    return [] if ours == theirs else [f"{path}: {ours!r} vs {theirs!r}"]


def test_same_answers(lg, dev_server):
    ours, theirs = lg.sync(lg.owner()), get_sync_client(url=dev_server, api_key=None)
    # The dev server outlives one test: a fresh tag keeps searches to this test's threads.
    tag = uuid.uuid4().hex
    made = {}
    for name, client in (("ours", ours), ("theirs", theirs)):
        t = client.threads.create(metadata={"team": tag})
        made[name] = {
            "create": t,
            "get": client.threads.get(t["thread_id"]),
            "update": client.threads.update(t["thread_id"], metadata={"b": 2}),
            "search": client.threads.search(metadata={"team": tag}),
            "count": client.threads.count(metadata={"team": tag}),
        }
    for call in ("create", "get", "update", "search"):
        a, b = made["ours"][call], made["theirs"][call]
        a, b = (a if isinstance(a, list) else [a]), (b if isinstance(b, list) else [b])
        # Every field theirs answers with, ours answers alike (ours may add fields).
        assert len(a) == len(b), call
        for x, y in zip(a, b, strict=True):
            assert same_shape({k: x.get(k) for k in y}, y) == [], (call, x, y)
    assert made["ours"]["count"] == made["theirs"]["count"] == 1

    # A thread written by a real run of the same graph on each side.
    lg.run_graph("diff-run", topic="ask")
    run = theirs.threads.create()
    theirs.runs.wait(run["thread_id"], "agent", input={"topic": "ask"})
    pairs = {
        "thread": (ours.threads.get("diff-run"), theirs.threads.get(run["thread_id"])),
        "state": (ours.threads.get_state("diff-run"), theirs.threads.get_state(run["thread_id"])),
    }
    a, b = pairs["thread"]
    assert a["status"] == b["status"] == "interrupted"
    assert a["values"] == b["values"]
    assert [len(v) for v in a["interrupts"].values()] == [len(v) for v in b["interrupts"].values()]
    assert [i["value"] for v in a["interrupts"].values() for i in v] == [
        i["value"] for v in b["interrupts"].values() for i in v
    ]
    a, b = pairs["state"]
    assert a["values"] == b["values"] and a["next"] == b["next"]
    assert {k: a["metadata"][k] for k in ("source", "step")} == {
        k: b["metadata"][k] for k in ("source", "step")
    }
    assert (a["parent_checkpoint"] is None) == (b["parent_checkpoint"] is None)
    assert [t["name"] for t in a["tasks"]] == [t["name"] for t in b["tasks"]]
    assert [i["value"] for i in a["interrupts"]] == [i["value"] for i in b["interrupts"]]
    assert set(b) <= set(a) | {"checkpoint_id", "parent_checkpoint_id"}
    hist_a = ours.threads.get_history("diff-run")
    hist_b = theirs.threads.get_history(run["thread_id"])
    assert [h["values"] for h in hist_a] == [h["values"] for h in hist_b]
    assert [h["next"] for h in hist_a] == [h["next"] for h in hist_b]
    assert [h["metadata"]["step"] for h in hist_a] == [h["metadata"]["step"] for h in hist_b]
    # History from one checkpoint: that checkpoint alone, on both; nothing for an unknown one.
    one_a = ours.threads.get_history("diff-run", checkpoint=hist_a[1]["checkpoint"])
    one_b = theirs.threads.get_history(run["thread_id"], checkpoint=hist_b[1]["checkpoint"])
    assert [h["metadata"]["step"] for h in one_a] == [h["metadata"]["step"] for h in one_b]
    assert len(one_a) == 1
    unknown = {"checkpoint_ns": "", "checkpoint_id": "1f000000-0000-6000-8000-000000000000"}
    assert ours.threads.get_history("diff-run", checkpoint=unknown) == []
    assert theirs.threads.get_history(run["thread_id"], checkpoint=unknown) == []
    # Search's extract reads the same paths on both; a reserved alias is a 422 on both.
    paths = {
        "first": "values.notes[0]",
        "last": "values.notes[-1]",
        "topic": "values.topic",
        "none": "values.notes[9]",
        "tag": "metadata.nope",
    }
    ext_a = ours.threads.search(ids=["diff-run"], extract=paths)
    ext_b = theirs.threads.search(ids=[run["thread_id"]], extract=paths)
    assert [t["extracted"] for t in ext_a] == [t["extracted"] for t in ext_b]
    assert ext_a[0]["extracted"]["topic"] == "ask"
    for client in (ours, theirs):
        with pytest.raises(UnprocessableEntityError):
            client.threads.search(extract={"status": "values.topic"})
    # return_minimal: no body from either.
    assert ours.threads.update("diff-run", metadata={"m": 1}, return_minimal=True) is None
    assert theirs.threads.update(run["thread_id"], metadata={"m": 1}, return_minimal=True) is None
    # update_state through the graph, as_node and reducers, on both.
    ours.threads.update_state("diff-run", {"notes": ["x"]}, as_node="write")
    theirs.threads.update_state(run["thread_id"], {"notes": ["x"]}, as_node="write")
    a, b = ours.threads.get_state("diff-run"), theirs.threads.get_state(run["thread_id"])
    assert a["values"] == b["values"] and a["next"] == b["next"]
    # Copy, delete-prune and delete answer alike.
    copy_a, copy_b = ours.threads.copy("diff-run"), theirs.threads.copy(run["thread_id"])
    # Theirs answers the copy (and a get of it) without values: compare the copies' states.
    assert (
        ours.threads.get_state(copy_a["thread_id"])["values"]
        == theirs.threads.get_state(copy_b["thread_id"])["values"]
    )
    assert ours.threads.prune([copy_a["thread_id"]]) == theirs.threads.prune([copy_b["thread_id"]])
    # Delete answers alike, and the thread is gone on both.
    assert ours.threads.delete("diff-run") == theirs.threads.delete(run["thread_id"])
    for client, thread_id in ((ours, "diff-run"), (theirs, run["thread_id"])):
        with pytest.raises(NotFoundError):
            client.threads.get(thread_id)


def test_same_subgraph_state(lg, dev_server, settings):
    # An interrupt raised inside a subgraph: get_state points at the subgraph's namespace,
    # and with subgraphs=True nests its state, on both.
    from checkpoints.store.registry import get_saver
    from tests.checkpoints.langgraph_api.graphs import nested_builder

    settings.CHECKPOINTS = {
        **settings.CHECKPOINTS,
        "GRAPHS": {
            "agent": "tests.checkpoints.langgraph_api.graphs:builder",
            "nested": "tests.checkpoints.langgraph_api.graphs:nested_builder",
        },
    }
    ours, theirs = lg.sync(lg.owner()), get_sync_client(url=dev_server, api_key=None)
    graph = nested_builder.compile(checkpointer=get_saver())
    config = {"configurable": {"thread_id": "nest-1"}, "metadata": {"graph_id": "nested"}}
    graph.invoke({"topic": "x"}, config)
    lg.claim("nest-1")
    run = theirs.threads.create()
    theirs.runs.wait(run["thread_id"], "nested", input={"topic": "x"})
    ids = {"ours": "nest-1", "theirs": run["thread_id"]}
    clients = {"ours": ours, "theirs": theirs}

    def both(call):
        return [call(clients[side], ids[side]) for side in ("ours", "theirs")]

    a, b = both(lambda c, t: c.threads.get(t))
    assert a["status"] == b["status"] == "interrupted"
    assert [i["value"] for v in a["interrupts"].values() for i in v] == [{"question": "publish x?"}]
    # Keyed by the outer task on both (task ids differ: they hash the checkpoint ids).
    assert list(a["interrupts"]) == [t["id"] for t in ours.threads.get_state("nest-1")["tasks"]]
    assert [len(v) for v in a["interrupts"].values()] == [len(v) for v in b["interrupts"].values()]
    a, b = both(lambda c, t: c.threads.get_state(t))
    assert [t["name"] for t in a["tasks"]] == [t["name"] for t in b["tasks"]] == ["inner"]
    # The subgraph's namespace is its task's node and id on both (ids differ).
    for side in (a, b):
        task = side["tasks"][0]
        assert task["checkpoint"]["checkpoint_ns"] == f"inner:{task['id']}"
        task["checkpoint"]["checkpoint_ns"] = "inner:<task>"
    assert same_shape(a["tasks"], b["tasks"]) == [], (a["tasks"], b["tasks"])
    ns = f"inner:{a['tasks'][0]['id']}"
    a, b = both(lambda c, t: c.threads.get_state(t, subgraphs=True))
    inner_a, inner_b = a["tasks"][0]["state"], b["tasks"][0]["state"]
    assert inner_a["checkpoint"]["checkpoint_ns"] == ns
    assert set(inner_a["checkpoint"]["checkpoint_map"]) == {"", ns}
    assert inner_a["checkpoint"]["checkpoint_map"][""] == a["checkpoint"]["checkpoint_id"]
    for key in ("values", "next", "interrupts"):
        assert same_shape(inner_a[key], inner_b[key]) == [], key
    assert same_shape(inner_a["tasks"], inner_b["tasks"]) == []
    assert same_shape(a["tasks"][0]["interrupts"], b["tasks"][0]["interrupts"]) == []
    # From a past checkpoint too (the SDK posts it to /state/checkpoint).
    a, b = both(
        lambda c, t: c.threads.get_state(
            t, checkpoint=c.threads.get_state(t)["checkpoint"], subgraphs=True
        )
    )
    assert same_shape(a["tasks"][0]["state"]["values"], b["tasks"][0]["state"]["values"]) == []
    # History leaves subgraph tasks bare on both.
    a, b = both(lambda c, t: c.threads.get_history(t, limit=1))
    assert a[0]["tasks"][0]["state"] is None is b[0]["tasks"][0]["state"]
