"""A deterministic ten-step chat graph for the end-to-end benchmark."""

from __future__ import annotations

import operator
from typing import Annotated, NotRequired, TypedDict

from langgraph.graph import END, START, StateGraph

STEPS = 10
REPLY = "x" * 260
# The user's turn is a question: a chat's text holds "?", which costs some savers more
# (ours once walked every value holding one for lone surrogates).
QUESTION = "y" * 259 + "?"


class ChatState(TypedDict):
    messages: Annotated[list, operator.add]
    route: str
    turn: int
    tool: str
    # Set only by the heavy workload's graph: a 64-256 KB document every DOCUMENT_EVERY steps.
    document: NotRequired[str]


def _node(i: int, documents: list[str] | None, document_every: int):
    def node(state: ChatState) -> dict:
        update: dict = {
            "messages": [{"type": "ai", "id": f"n{i}-{len(state['messages'])}", "content": REPLY}],
            "route": f"node-{i}",
        }
        if i % 3 == 0:
            update["tool"] = f"tool-{i}"
        if i == STEPS - 1:
            update["turn"] = state.get("turn", 0) + 1
        step = state.get("turn", 0) * STEPS + i
        if documents and step % document_every == 0:
            update["document"] = documents[step // document_every % len(documents)]
        return update

    return node


def build_graph(checkpointer, documents: list[str] | None = None, document_every: int = 8):
    """The chat graph; with ``documents`` a node also sets one every ``document_every`` steps."""
    builder = StateGraph(ChatState)
    for i in range(STEPS):
        builder.add_node(f"n{i}", _node(i, documents, document_every))
    builder.add_edge(START, "n0")
    for i in range(STEPS - 1):
        builder.add_edge(f"n{i}", f"n{i + 1}")
    builder.add_edge(f"n{STEPS - 1}", END)
    return builder.compile(checkpointer=checkpointer)


def run_turn(graph, thread_id: str, turn: int, durability: str | None = "sync") -> dict:
    """One user turn: a human message in, ten nodes, every checkpoint written synchronously.

    ``durability=None`` leaves LangGraph's default ("async": a step's checkpoint is written
    in a worker thread while the next step runs; the invocation waits for it at the end).
    """
    config = {"configurable": {"thread_id": thread_id}}
    message = {"type": "human", "id": f"h{turn}", "content": QUESTION}
    options = {} if durability is None else {"durability": durability}
    return graph.invoke(
        {"messages": [message], "route": "start", "tool": "", "turn": turn}, config, **options
    )


async def arun_turn(graph, thread_id: str, turn: int) -> dict:
    """`run_turn` through ``ainvoke``: the saver's async methods on the running loop."""
    config = {"configurable": {"thread_id": thread_id}}
    message = {"type": "human", "id": f"h{turn}", "content": QUESTION}
    return await graph.ainvoke(
        {"messages": [message], "route": "start", "tool": "", "turn": turn},
        config,
        durability="sync",
    )
