"""Real LangGraph graphs (deterministic nodes, no LLM) for the store tests: a linear run, an
interrupt, a subgraph that interrupts, a Send fan-out."""

from __future__ import annotations

import operator
from typing import Annotated, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import Send, interrupt


class LogState(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    runs: int


def _node_a(state: LogState) -> dict:
    return {"log": ["a"], "runs": state.get("runs", 0) + 1}


def _node_b(state: LogState) -> dict:
    return {"log": ["b"]}


def linear_graph(checkpointer, **compile_options):
    """START -> a -> b -> END over an appending log."""
    builder = StateGraph(LogState)
    builder.add_node("a", _node_a)
    builder.add_node("b", _node_b)
    builder.add_edge(START, "a")
    builder.add_edge("a", "b")
    builder.add_edge("b", END)
    return builder.compile(checkpointer=checkpointer, **compile_options)


class AskState(TypedDict, total=False):
    question: str
    answer: str
    greeting: str


def _ask(state: AskState) -> dict:
    answer = interrupt({"question": state["question"]})
    return {"answer": answer}


def _greet(state: AskState) -> dict:
    return {"greeting": f"hello {state['answer']}"}


def interrupt_graph(checkpointer):
    """START -> ask (interrupts for an answer) -> greet -> END."""
    builder = StateGraph(AskState)
    builder.add_node("ask", _ask)
    builder.add_node("greet", _greet)
    builder.add_edge(START, "ask")
    builder.add_edge("ask", "greet")
    builder.add_edge("greet", END)
    return builder.compile(checkpointer=checkpointer)


class ChildState(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


def _child_first(state: ChildState) -> dict:
    return {"log": ["child-1"]}


def _child_wait(state: ChildState) -> dict:
    approved = interrupt("approve?")
    return {"log": [f"child-2:{approved}"]}


class ParentState(TypedDict, total=False):
    # Plain value in the parent: the child's whole log replaces it rather than being added.
    log: list[str]


def _parent_after(state: ParentState) -> dict:
    return {"log": [*state["log"], "parent-after"]}


def subgraph_graph(checkpointer):
    """A parent whose 'child' node is a compiled subgraph that interrupts midway."""
    child = StateGraph(ChildState)
    child.add_node("first", _child_first)
    child.add_node("wait", _child_wait)
    child.add_edge(START, "first")
    child.add_edge("first", "wait")
    child.add_edge("wait", END)
    parent = StateGraph(ParentState)
    parent.add_node("child", child.compile())
    parent.add_node("after", _parent_after)
    parent.add_edge(START, "child")
    parent.add_edge("child", "after")
    parent.add_edge("after", END)
    return parent.compile(checkpointer=checkpointer)


class MapState(TypedDict, total=False):
    topics: list[str]
    results: Annotated[list[str], operator.add]
    summary: str


def _fan_out(state: MapState) -> list[Send]:
    return [Send("work", {"topic": topic}) for topic in state["topics"]]


def _work(item: dict) -> dict:
    return {"results": [item["topic"].upper()]}


def _reduce(state: MapState) -> dict:
    return {"summary": "+".join(state["results"])}


def map_reduce_graph(checkpointer):
    """Send one 'work' task per topic, then join the reduced results."""
    builder = StateGraph(MapState)
    builder.add_node("work", _work)
    builder.add_node("reduce", _reduce)
    builder.add_conditional_edges(START, _fan_out, ["work"])
    builder.add_edge("work", "reduce")
    builder.add_edge("reduce", END)
    return builder.compile(checkpointer=checkpointer)
