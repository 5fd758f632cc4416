"""The same real graphs through the remote saver and through the in-process saver on the
same store: identical state histories, and each thread's rows as the other's. On SQLite the
service stores the client's bytes; on Redis it converts them to the store's own form."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.types import Command

from tests.checkpoints.store.graphs import interrupt_graph, map_reduce_graph, subgraph_graph
from tests.remote.backing import BACKINGS, service_on, stored_blobs
from tests.store_helpers import config_for, put_chain

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


@pytest.mark.parametrize("backing", BACKINGS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_the_same_graph_gives_the_same_history(request, case, backing):
    make, first, resume = CASES[case]
    remote, local = service_on(request, backing)
    over_http = run(make, remote, f"remote-{case}", first, resume)
    in_process = run(make, local, f"local-{case}", first, resume)
    assert over_http == in_process
    assert len(over_http) >= 3
    # The in-process saver reads what the service wrote, and the other way round.
    assert history(make(local), f"remote-{case}") == in_process
    assert history(make(remote), f"local-{case}") == in_process


@pytest.mark.parametrize("backing", BACKINGS)
def test_values_of_the_graphs_own_types_travel_as_their_bytes(request, backing):
    remote, local = service_on(request, backing)
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
    # Stored as an in-process put stores them: the serializer's bytes, or Redis's own form.
    put_chain(local, "typed-local", values)
    through_service = stored_blobs(local, "typed")
    assert through_service == stored_blobs(local, "typed-local")
    assert set(through_service) == set(values)
    if backing == "redis":
        assert {t for t, _ in through_service.values()} <= {"json", "json+zstd"}


@pytest.mark.parametrize("backing", BACKINGS)
def test_the_async_path_gives_the_same_history(request, backing):
    remote, local = service_on(request, backing)
    graph = interrupt_graph(remote)
    config = {"configurable": {"thread_id": "async"}}

    async def go():
        await graph.ainvoke({"question": "q"}, config)
        await graph.ainvoke(Command(resume="a"), config)
        return [s.values async for s in graph.aget_state_history(config)]

    values = asyncio.run(go())
    assert values[0] == {"question": "q", "answer": "a", "greeting": "hello a"}
    assert [s.values for s in interrupt_graph(local).get_state_history(config)] == values
