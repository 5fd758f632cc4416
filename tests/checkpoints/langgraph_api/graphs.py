"""Small real graphs for the LangGraph API tests (registered in CHECKPOINTS["GRAPHS"])."""

from __future__ import annotations

import operator
from typing import Annotated

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt
from typing_extensions import TypedDict


class State(TypedDict, total=False):
    topic: str
    notes: Annotated[list[str], operator.add]
    approved: bool


def plan(state: State) -> dict:
    return {"notes": [f"plan {state['topic']}"]}


def write(state: State) -> dict:
    return {"notes": ["write"]}


def review(state: State) -> dict:
    answer = interrupt({"question": "approve?"}) if state["topic"] == "ask" else True
    return {"approved": bool(answer), "notes": ["review"]}


builder = StateGraph(State)
builder.add_node("plan", plan)
builder.add_node("write", write)
builder.add_node("review", review)
builder.add_edge(START, "plan")
builder.add_edge("plan", "write")
builder.add_edge("write", "review")
builder.add_edge("review", END)
# What `langgraph dev` serves (its langgraph.json points here).
graph = builder.compile()
