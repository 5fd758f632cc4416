"""Threads for the console's "plain words" tests, each written by a real LangGraph graph: an
interrupt asked inside a subgraph, a chat whose messages hold Markdown (and an attempt at
HTML), and a thread rolled back and run on, so its history has two branches."""

from __future__ import annotations

import operator
from typing import Annotated, TypedDict

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from checkpoints.models import Checkpoint
from checkpoints.timetravel import TimeTravel
from tests.admin_fixtures import run_chat

QUESTION = {"question": "Ship order 42?", "options": ["yes", "no"]}

# What a model or a user might put in a message: Markdown, and HTML that must stay text.
MARKDOWN_REPLY = (
    "**Order 42** shipped on *Monday*.\n\n"
    "- packed\n- sent\n\n"
    "<script>alert('owned')</script> <img src=x onerror=alert(1)> "
    "[click me](javascript:alert(1)) and [the docs](https://example.com/docs)"
)


class OrderState(TypedDict, total=False):
    messages: Annotated[list, operator.add]
    verdict: str


def _prepare(state: OrderState) -> OrderState:
    return {"verdict": "pending"}


def _ask(state: OrderState) -> OrderState:
    return {"verdict": interrupt(QUESTION)}


def run_subgraph_interrupt(saver, thread_id: str) -> str:
    """A graph whose node ``review`` is a subgraph; its node ``ask`` interrupts."""
    inner = StateGraph(OrderState)
    inner.add_node("ask", _ask)
    inner.add_edge(START, "ask")
    inner.add_edge("ask", END)
    outer = StateGraph(OrderState)
    outer.add_node("prepare", _prepare)
    outer.add_node("review", inner.compile())
    outer.add_edge(START, "prepare")
    outer.add_edge("prepare", "review")
    outer.add_edge("review", END)
    outer.compile(checkpointer=saver).invoke(
        {"messages": [HumanMessage(content="ship it")]}, {"configurable": {"thread_id": thread_id}}
    )
    return thread_id


def _reply(state: OrderState) -> OrderState:
    return {"messages": [AIMessage(content=MARKDOWN_REPLY)]}


def run_markdown_chat(saver, thread_id: str, turns: int = 4) -> str:
    """A chat of ``turns`` questions, each answered in Markdown."""
    graph = StateGraph(OrderState)
    graph.add_node("reply", _reply)
    graph.add_edge(START, "reply")
    graph.add_edge("reply", END)
    compiled = graph.compile(checkpointer=saver)
    for n in range(turns):
        compiled.invoke(
            {"messages": [HumanMessage(content=f"where is order {n + 1}? <b>now</b>")]},
            {"configurable": {"thread_id": thread_id}},
        )
    return thread_id


def run_rolled_back(saver, thread_id: str) -> tuple[str, str]:
    """A chat of two turns rolled back to its first turn's end, then run one more turn.

    Returns (the rollback target's id, the replaced head's id).
    """
    run_chat(saver, thread_id, turns=2)
    rows = list(
        Checkpoint.objects.filter(thread__thread_id=thread_id, checkpoint_ns="").order_by(
            "checkpoint_id"
        )
    )
    first_turn_end = next(r for r in rows if r.step == 2)
    replaced = rows[-1].checkpoint_id
    TimeTravel(saver).rollback(thread_id, first_turn_end.checkpoint_id)
    run_chat(saver, thread_id, turns=1)
    return first_turn_end.checkpoint_id, replaced
