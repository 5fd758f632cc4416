"""Seed data for the admin tests: real LangGraph runs on the deployment's saver, a long
thread of messages, staff users."""

from __future__ import annotations

import operator
import uuid
from datetime import UTC, datetime
from typing import Annotated, TypedDict

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.base import create_checkpoint, empty_checkpoint
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

# The agent whose node calls a subgraph is the page bench's too: one graph for both.
from bench.subgraph_pages import agent_graph, run_subgraph_calls  # noqa: F401
from tests.store_helpers import config_for

# Every list page of the store's admin, as "app/model".
CHANGELISTS = (
    "checkpoints/thread",
    "checkpoints/checkpoint",
    "checkpoints/finishedmark",
    "checkpoints/auditevent",
    "retention/park",
    "retention/sweeprun",
)


class ChatState(TypedDict, total=False):
    messages: Annotated[list, operator.add]
    notes: dict
    turn: int


def _answer(state: ChatState) -> ChatState:
    turn = state.get("turn", 0) + 1
    return {
        "messages": [AIMessage(content=f"answer {turn}")],
        "notes": {**(state.get("notes") or {}), f"turn{turn}": "answered"},
        "turn": turn,
    }


def _review(state: ChatState) -> ChatState:
    return {
        "notes": {**(state.get("notes") or {}), "reviewed_at": datetime(2026, 1, 2, tzinfo=UTC)}
    }


def _approve(state: ChatState) -> ChatState:
    verdict = interrupt("approve the answer?")
    return {"messages": [HumanMessage(content=f"approved: {verdict}")]}


def chat_graph(saver):
    graph = StateGraph(ChatState)
    graph.add_node("answer", _answer)
    graph.add_node("review", _review)
    graph.add_edge(START, "answer")
    graph.add_edge("answer", "review")
    graph.add_edge("review", END)
    return graph.compile(checkpointer=saver)


def paused_graph(saver):
    graph = StateGraph(ChatState)
    graph.add_node("answer", _answer)
    graph.add_node("approve", _approve)
    graph.add_edge(START, "answer")
    graph.add_edge("answer", "approve")
    graph.add_edge("approve", END)
    return graph.compile(checkpointer=saver)


def run_chat(saver, thread_id: str | None = None, turns: int = 2) -> str:
    """Run the chat graph ``turns`` times on one thread; return its id."""
    thread_id = thread_id or f"chat-{uuid.uuid4().hex[:8]}"
    graph = chat_graph(saver)
    config = {"configurable": {"thread_id": thread_id}}
    for n in range(turns):
        graph.invoke({"messages": [HumanMessage(content=f"question {n + 1}")]}, config)
    return thread_id


def run_paused(saver, thread_id: str | None = None) -> str:
    """Run a graph that stops on an interrupt: its thread is live."""
    thread_id = thread_id or f"paused-{uuid.uuid4().hex[:8]}"
    paused_graph(saver).invoke(
        {"messages": [HumanMessage(content="please check")]},
        {"configurable": {"thread_id": thread_id}},
    )
    return thread_id


class Box(TypedDict):
    x: int


def _explode(state: Box) -> Box:
    raise ValueError("the tool timed out")


def run_failing(saver, thread_id: str) -> str:
    """Run a graph whose only node raises: its thread's head holds the error."""
    graph = StateGraph(Box)
    graph.add_node("explode", _explode)
    graph.add_edge(START, "explode")
    graph.add_edge("explode", END)
    with pytest.raises(ValueError):
        graph.compile(checkpointer=saver).invoke(
            {"x": 1}, {"configurable": {"thread_id": thread_id}}
        )
    return thread_id


def _agent(state: ChatState) -> ChatState:
    if not any(m.type == "tool" for m in state["messages"]):
        call = {"name": "lookup_order", "args": {"order": 42}, "id": "call-42"}
        return {"messages": [AIMessage(content="Let me look that up.", tool_calls=[call])]}
    return {"messages": [AIMessage(content="Order 42 shipped on Monday.")]}


def _tools(state: ChatState) -> ChatState:
    call = state["messages"][-1].tool_calls[0]
    reply = ToolMessage(content="shipped 2026-11-30", tool_call_id=call["id"], name=call["name"])
    return {"messages": [reply]}


def run_tools(saver, thread_id: str) -> str:
    """A model that calls a tool, then answers: human, ai (tool call), tool, ai."""
    graph = StateGraph(ChatState)
    graph.add_node("agent", _agent)
    graph.add_node("tools", _tools)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", lambda s: "tools" if s["messages"][-1].tool_calls else END)
    graph.add_edge("tools", "agent")
    graph.compile(checkpointer=saver).invoke(
        {"messages": [HumanMessage(content="Where is order 42?")]},
        {"configurable": {"thread_id": thread_id}},
    )
    return thread_id


# A long thread: TOTAL messages, shown PAGE at a time.
TOTAL = 10_000
PAGE = 50


def message(i: int):
    kind = HumanMessage if i % 2 == 0 else AIMessage
    return kind(content=f"said #{i}.", id=f"m{i}")


def long_thread(store, thread_id: str, total: int = TOTAL, steps: int = 3) -> None:
    """``steps`` checkpoints through the saver; the first holds ``total - steps + 1``
    messages, each later one appends one, so the head holds ``total``."""
    held = [message(i) for i in range(total - steps + 1)]
    config = config_for(thread_id, ns="")
    checkpoint = empty_checkpoint()
    for step in range(steps):
        if step:
            held = [*held, message(len(held))]
        versions = dict(checkpoint["channel_versions"])
        new = {}
        for channel in ("messages", "turn"):
            versions[channel] = new[channel] = store.get_next_version(versions.get(channel), None)
        checkpoint = create_checkpoint(
            {
                **checkpoint,
                "channel_values": {"messages": held, "turn": step},
                "channel_versions": versions,
            },
            None,
            step,
        )
        metadata = {"source": "input" if step == 0 else "loop", "step": step, "parents": {}}
        config = store.put(config, checkpoint, metadata, new)


@pytest.fixture
def saver(transactional_db, settings):
    from checkpoints.store.registry import get_saver

    settings.CHECKPOINTS = {**settings.CHECKPOINTS, "PROVIDER": "sqlite", "CONN_STRING": None}
    return get_saver()


def staff_user(username: str, *perms: str):
    """A staff user holding ``perms`` ("app.codename")."""
    user = get_user_model().objects.create_user(username, password="pw-" + username, is_staff=True)
    for perm in perms:
        app_label, codename = perm.split(".")
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )
    return get_user_model().objects.get(pk=user.pk)


@pytest.fixture
def superuser(transactional_db):
    return get_user_model().objects.create_superuser("root", "root@example.com", "pw-root")
