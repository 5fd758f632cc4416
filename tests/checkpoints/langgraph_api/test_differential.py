"""The same SDK calls against `langgraph dev` (LangGraph's own server) and ours, compared.

`langgraph dev` (tests/langgraph_dev.py) serves tests/.../graphs.py from a langgraph.json;
ours registers the same file's graphs from that langgraph.json, as CHECKPOINTS_GRAPHS does.

Deliberate differences, not compared: ids and timestamps; auth and owner isolation (the dev
server has none); a created thread holds one empty checkpoint here (the thread exists in
the store), none there, so history of an empty thread differs, and its state here is that
checkpoint's (the graph's channel defaults, with a checkpoint) where there it is ``{}`` with
no checkpoint; the run metadata the dev server adds to each checkpoint (run_id,
assistant_id, langgraph_* ...: ours stores what the writer stored); keep_latest prune (the
in-memory server refuses it) and `before` paging (it answers 500) are tested in test_sdk.
"""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.errors import NotFoundError, UnprocessableEntityError

from checkpoints.graph_sources import graphs_from_langgraph_json
from checkpoints.langgraph_api.models import ThreadMetadata as ThreadMetadataRow
from tests.langgraph_dev import running_dev_server, same_shape

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

HERE = Path(__file__).parent
# What `langgraph dev` serves, and what ours registers from the same file.
LANGGRAPH_JSON = {
    "dependencies": ["."],
    "graphs": {
        "agent": "./graphs.py:graph",
        "nested": "./graphs.py:nested",
        "chat": "./graphs.py:chat",
    },
}


@pytest.fixture(scope="module")
def dev_folder(tmp_path_factory) -> Path:
    """A LangGraph project folder: tests/.../graphs.py beside a langgraph.json naming it."""
    folder = tmp_path_factory.mktemp("langgraph-dev")
    shutil.copy(HERE / "graphs.py", folder / "graphs.py")
    (folder / "langgraph.json").write_text(json.dumps(LANGGRAPH_JSON))
    return folder


@pytest.fixture(scope="module")
def dev_server(dev_folder):
    with running_dev_server(dev_folder) as url:
        yield url


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


def chat_side(lg, dev_server, dev_folder, settings):
    """Ours with the graphs registered from the dev server's own langgraph.json (as
    CHECKPOINTS_GRAPHS does), and both clients."""
    settings.CHECKPOINTS = {
        **settings.CHECKPOINTS,
        "GRAPHS": graphs_from_langgraph_json(dev_folder / "langgraph.json"),
    }
    return lg.sync(lg.owner()), get_sync_client(url=dev_server, api_key=None)


def test_same_plain_messages_and_step_minus_one(lg, dev_server, dev_folder, settings):
    # A chat run (a human question, an AI tool call, the tool's answer, the reply) on each
    # side: the JSON of state, history, search, thread and copy is the same, field by field.
    ours, theirs = chat_side(lg, dev_server, dev_folder, settings)
    from checkpoints.graphs import load_graph
    from checkpoints.store.registry import get_saver

    question = {"messages": [{"role": "user", "content": "weather?"}]}
    graph = load_graph("chat").copy(update={"checkpointer": get_saver()})
    graph.invoke(question, {"configurable": {"thread_id": "chat-1"}})
    lg.claim("chat-1")
    ThreadMetadataRow.objects.update_or_create(
        provider=get_saver().provider,
        thread_id="chat-1",
        defaults={"metadata": {"graph_id": "chat"}},
    )
    run = theirs.threads.create(metadata={"graph_id": "chat"})
    theirs.runs.wait(run["thread_id"], "chat", input=question)
    ids = {"ours": "chat-1", "theirs": run["thread_id"]}
    clients = {"ours": ours, "theirs": theirs}

    def both(call):
        return [call(clients[side], ids[side]) for side in ("ours", "theirs")]

    a, b = both(lambda c, t: c.threads.get_state(t))
    # Plain message dicts, the fields model_dump() gives, on both.
    kinds = [(m["type"], sorted(m)) for m in a["values"]["messages"]]
    human = ["additional_kwargs", "content", "id", "name", "response_metadata", "type"]
    ai = sorted([*human, "tool_calls", "invalid_tool_calls", "usage_metadata"])
    tool = sorted([*human, "tool_call_id", "artifact", "status"])
    assert kinds == [("human", human), ("ai", ai), ("tool", tool), ("ai", ai)]
    assert a["values"]["messages"][1]["tool_calls"][0]["args"] == {"city": "Paris"}
    assert a["values"]["messages"][-1]["content"] == "It is sunny."
    assert same_shape(a["values"], b["values"]) == []
    assert a["next"] == b["next"] == []
    history = both(lambda c, t: c.threads.get_history(t))
    assert [h["metadata"]["step"] for h in history[0]] == [3, 2, 1, 0, -1]
    assert same_shape([h["values"] for h in history[0]], [h["values"] for h in history[1]]) == []
    assert [h["next"] for h in history[0]] == [h["next"] for h in history[1]]
    # Step -1: the graph's channel defaults, in history and in get_state at that checkpoint.
    assert history[0][-1]["values"] == history[1][-1]["values"] == {"messages": [], "steps": []}
    first = {side: history[i][-1]["checkpoint"] for i, side in enumerate(("ours", "theirs"))}
    a, b = (clients[s].threads.get_state(ids[s], checkpoint=first[s]) for s in ("ours", "theirs"))
    assert a["values"] == b["values"] == {"messages": [], "steps": []}
    assert a["next"] == b["next"] == ["__start__"]
    # A thread made and never run (a documented difference): here its one checkpoint at
    # step -1 shows the graph's defaults, as get_state at any step -1 does; there no
    # checkpoint, so {}.
    made = {s: clients[s].threads.create(metadata={"graph_id": "chat"}) for s in clients}
    a, b = (clients[s].threads.get_state(made[s]["thread_id"]) for s in ("ours", "theirs"))
    assert a["values"] == {"messages": [], "steps": []} and a["metadata"]["step"] == -1
    assert b["values"] == {} and b["checkpoint"] is None
    # A thread's values, a search's values and extract read the same dicts.
    a, b = both(lambda c, t: c.threads.get(t))
    assert same_shape(a["values"], b["values"]) == []
    path = {"last": "values.messages[-1].content", "kind": "values.messages[1].type"}
    a, b = both(lambda c, t: c.threads.search(ids=[t], extract=path))
    assert same_shape(a[0]["values"], b[0]["values"]) == []
    assert a[0]["extracted"] == b[0]["extracted"] == {"last": "It is sunny.", "kind": "ai"}
    # update_state as a node, with a message given as a dict: the reducer makes it a message.
    reply = {"messages": [{"type": "ai", "content": "Rain later."}], "steps": ["edit"]}
    a, b = both(lambda c, t: c.threads.update_state(t, reply, as_node="agent"))
    assert same_shape(a, b) == [], (a, b)
    a, b = both(lambda c, t: c.threads.get_state(t))
    assert a["values"]["messages"][-1]["content"] == "Rain later."
    assert same_shape(a["values"], b["values"]) == []
    assert a["next"] == b["next"]
    assert {k: a["metadata"][k] for k in ("source", "step")} == {
        k: b["metadata"][k] for k in ("source", "step")
    }
    # A copy's state holds the same dicts.
    a, b = both(lambda c, t: c.threads.copy(t))
    assert (
        same_shape(
            ours.threads.get_state(a["thread_id"])["values"],
            theirs.threads.get_state(b["thread_id"])["values"],
        )
        == []
    )


def test_same_supersteps_through_a_registered_graph(lg, dev_server, dev_folder, settings):
    # create(supersteps=...) through the graph named in metadata: reducers and as_node act
    # alike, and history shows the same checkpoints.
    ours, theirs = chat_side(lg, dev_server, dev_folder, settings)
    # As a LangGraph run writes them: the input, the start node passing it on, the nodes.
    question = {"messages": [{"type": "human", "content": "hi"}]}
    supersteps = [
        {"updates": [{"values": question, "as_node": "__input__"}]},
        {"updates": [{"values": question, "as_node": "__start__"}]},
        {
            "updates": [
                {
                    "values": {"messages": [{"type": "ai", "content": "hello"}], "steps": ["x"]},
                    "as_node": "agent",
                }
            ]
        },
        {"updates": [{"values": {"steps": ["y"]}, "as_node": "agent"}]},
    ]
    made = {
        side: client.threads.create(metadata={"graph_id": "chat"}, supersteps=supersteps)
        for side, client in (("ours", ours), ("theirs", theirs))
    }
    a, b = made["ours"], made["theirs"]
    assert (
        same_shape({k: a.get(k) for k in b if k != "values"}, {k: b[k] for k in b if k != "values"})
        == []
    )
    states = [
        c.threads.get_state(made[s]["thread_id"]) for s, c in (("ours", ours), ("theirs", theirs))
    ]
    assert same_shape(states[0]["values"], states[1]["values"]) == []
    assert states[0]["values"]["steps"] == ["x", "y"]
    assert [m["type"] for m in states[0]["values"]["messages"]] == ["human", "ai"]
    assert states[0]["next"] == states[1]["next"]
    hist = [
        c.threads.get_history(made[s]["thread_id"]) for s, c in (("ours", ours), ("theirs", theirs))
    ]
    assert [(h["metadata"]["step"], h["metadata"]["source"]) for h in hist[0]] == [
        (h["metadata"]["step"], h["metadata"]["source"]) for h in hist[1]
    ]
    assert same_shape([h["values"] for h in hist[0]], [h["values"] for h in hist[1]]) == []
