"""A deterministic ten-step chat graph for the end-to-end benchmark."""

from __future__ import annotations

import operator
from typing import Annotated, TypedDict

from langgraph.graph import END, START, StateGraph

STEPS = 10
REPLY = "x" * 260


class ChatState(TypedDict):
    messages: Annotated[list, operator.add]
    route: str
    turn: int
    tool: str


def _node(i: int):
    def node(state: ChatState) -> dict:
        update: dict = {
            "messages": [{"type": "ai", "id": f"n{i}-{len(state['messages'])}", "content": REPLY}],
            "route": f"node-{i}",
        }
        if i % 3 == 0:
            update["tool"] = f"tool-{i}"
        if i == STEPS - 1:
            update["turn"] = state.get("turn", 0) + 1
        return update

    return node


def build_graph(checkpointer):
    builder = StateGraph(ChatState)
    for i in range(STEPS):
        builder.add_node(f"n{i}", _node(i))
    builder.add_edge(START, "n0")
    for i in range(STEPS - 1):
        builder.add_edge(f"n{i}", f"n{i + 1}")
    builder.add_edge(f"n{STEPS - 1}", END)
    return builder.compile(checkpointer=checkpointer)


def run_turn(graph, thread_id: str, turn: int) -> dict:
    """One user turn: a human message in, ten nodes, every checkpoint written synchronously."""
    config = {"configurable": {"thread_id": thread_id}}
    message = {"type": "human", "id": f"h{turn}", "content": "y" * 260}
    return graph.invoke(
        {"messages": [message], "route": "start", "tool": "", "turn": turn},
        config,
        durability="sync",
    )


async def arun_turn(graph, thread_id: str, turn: int) -> dict:
    """`run_turn` through ``ainvoke``: the saver's async methods on the running loop."""
    config = {"configurable": {"thread_id": thread_id}}
    message = {"type": "human", "id": f"h{turn}", "content": "y" * 260}
    return await graph.ainvoke(
        {"messages": [message], "route": "start", "tool": "", "turn": turn},
        config,
        durability="sync",
    )
