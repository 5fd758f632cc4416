"""A small deterministic LangGraph agent used to write demo threads (no LLM needed)."""

from __future__ import annotations

import operator
from typing import Annotated, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt


class DemoState(TypedDict, total=False):
    messages: Annotated[list[str], operator.add]
    topic: str
    turns: int
    approved: bool


def _plan(state: DemoState) -> DemoState:
    topic = state.get("topic") or "checkpoints"
    return {
        "messages": [f"planner: outline a note about {topic}"],
        "turns": state.get("turns", 0) + 1,
    }


def _write(state: DemoState) -> DemoState:
    return {"messages": [f"writer: draft {state.get('turns', 0)} about {state.get('topic')}"]}


def _review(state: DemoState) -> DemoState:
    if state.get("topic", "").startswith("needs approval"):
        decision = interrupt({"question": "Publish this draft?", "draft": state["messages"][-1]})
        return {"approved": bool(decision), "messages": [f"reviewer: approved={bool(decision)}"]}
    return {"approved": True, "messages": ["reviewer: looks good"]}


def build_demo_graph(checkpointer):
    """plan -> write -> review; review pauses for approval when the topic asks for it."""
    builder = StateGraph(DemoState)
    builder.add_node("plan", _plan)
    builder.add_node("write", _write)
    builder.add_node("review", _review)
    builder.add_edge(START, "plan")
    builder.add_edge("plan", "write")
    builder.add_edge("write", "review")
    builder.add_edge("review", END)
    return builder.compile(checkpointer=checkpointer)


# The demo graph as CHECKPOINTS["GRAPHS"] registers it: {"demo": "checkpoints.demo:graph"}.
graph = build_demo_graph(None)
