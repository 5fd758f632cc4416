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


class Inner(TypedDict, total=False):
    topic: str
    notes: Annotated[list[str], operator.add]


def inner_ask(state: Inner) -> dict:
    answer = interrupt({"question": f"publish {state['topic']}?"})
    return {"notes": [f"inner {answer}"]}


inner_builder = StateGraph(Inner)
inner_builder.add_node("ask", inner_ask)
inner_builder.add_edge(START, "ask")
inner_builder.add_edge("ask", END)

# A graph whose interrupt is raised inside a subgraph (its node "inner").
nested_builder = StateGraph(State)
nested_builder.add_node("plan", plan)
nested_builder.add_node("inner", inner_builder.compile())
nested_builder.add_edge(START, "plan")
nested_builder.add_edge("plan", "inner")
nested_builder.add_edge("inner", END)
nested = nested_builder.compile()
