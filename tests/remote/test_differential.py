"""The same real graphs through the remote saver and through the in-process saver on the
same store: identical state histories, and each thread's rows as the other's."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.types import Command

from checkpoints.models import ChannelBlob
from checkpoints.store.registry import get_saver
from tests.checkpoints.store.graphs import interrupt_graph, map_reduce_graph, subgraph_graph
from tests.store_helpers import config_for, put_chain, remote_saver

pytestmark = pytest.mark.django_db(transaction=True)


@dataclass
class Note:
    text: str
    tags: list[str]


def history(graph, thread_id: str) -> list[tuple]:
    config = {"configurable": {"thread_id": thread_id}}
    return [
        (
            snap.values,
            snap.next,
            [(t.name, [i.value for i in t.interrupts]) for t in snap.tasks],
            {k: v for k, v in snap.metadata.items() if k not in ("thread_id",)},
            snap.parent_config is None,
        )
        for snap in graph.get_state_history(config)
    ]


def run(make, saver, thread_id: str, first, resume=None) -> list[tuple]:
    graph = make(saver)
    config = {"configurable": {"thread_id": thread_id}}
    graph.invoke(first, config)
    if resume is not None:
        graph.invoke(Command(resume=resume), config)
    return history(graph, thread_id)


CASES = {
    "interrupt": (interrupt_graph, {"question": "name?"}, "ada"),
    "subgraph": (subgraph_graph, {"log": []}, "yes"),
    "map_reduce": (map_reduce_graph, {"topics": ["a", "b", "c"]}, None),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_same_graph_gives_the_same_history(request, case):
    make, first, resume = CASES[case]
    remote = remote_saver(request)
    local = get_saver("sqlite", using="default")
    over_http = run(make, remote, f"remote-{case}", first, resume)
    in_process = run(make, local, f"local-{case}", first, resume)
    assert over_http == in_process
    assert len(over_http) >= 3
    # The in-process saver reads what the service wrote, and the other way round.
    assert history(make(local), f"remote-{case}") == in_process
    assert history(make(remote), f"local-{case}") == in_process


def test_values_of_the_graphs_own_types_travel_as_their_bytes(request):
    remote = remote_saver(request)
    local = get_saver("sqlite", using="default")
    values = {
        "messages": [HumanMessage("hi", id="1"), AIMessage("hello", id="2")],
        # A tuple comes back a list from LangGraph's msgpack, in process too.
        "note": Note("n", ["x", "y"]),
        "raw": b"\x00\xff",
        "nested": {"set": {1, 2}, "frozen": frozenset("ab")},
    }
    put_chain(remote, "typed", values)
    read_remote = remote.get_tuple(config_for("typed")).checkpoint["channel_values"]
    read_local = local.get_tuple(config_for("typed")).checkpoint["channel_values"]
    assert read_remote == read_local == values
    assert type(read_remote["note"]) is Note
    # Stored as the serializer's bytes, as an in-process put stores them.
    put_chain(local, "typed-local", values)
    stored = {
        (row.thread.thread_id, row.channel): (row.type, bytes(row.blob))
        for row in ChannelBlob.objects.select_related("thread")
    }
    for channel in values:
        assert stored[("typed", channel)] == stored[("typed-local", channel)]


def test_the_async_path_gives_the_same_history(request):
    remote = remote_saver(request)
    graph = interrupt_graph(remote)
    config = {"configurable": {"thread_id": "async"}}

    async def go():
        await graph.ainvoke({"question": "q"}, config)
        await graph.ainvoke(Command(resume="a"), config)
        return [s.values async for s in graph.aget_state_history(config)]

    values = asyncio.run(go())
    assert values[0] == {"question": "q", "answer": "a", "greeting": "hello a"}
    local = get_saver("sqlite", using="default")
    assert [s.values for s in interrupt_graph(local).get_state_history(config)] == values
