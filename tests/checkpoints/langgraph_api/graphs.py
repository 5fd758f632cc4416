"""Small real graphs for the LangGraph API tests (registered in CHECKPOINTS["GRAPHS"])."""

from __future__ import annotations

import operator
from typing import Annotated

from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
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


# A chat graph as Studio shows one: messages (a human question, an AI message calling a
# tool, the tool's answer, the AI's reply) beside a plain list channel with a reducer.
class Chat(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    steps: Annotated[list[str], operator.add]


def agent(state: Chat) -> dict:
    if any(isinstance(m, ToolMessage) for m in state["messages"]):
        return {"messages": [AIMessage("It is sunny.")], "steps": ["answer"]}
    call = {"name": "weather", "args": {"city": "Paris"}, "id": "call-1", "type": "tool_call"}
    return {"messages": [AIMessage("", tool_calls=[call])], "steps": ["call"]}


def tools(state: Chat) -> dict:
    return {"messages": [ToolMessage("sunny", tool_call_id="call-1")], "steps": ["tool"]}


def route(state: Chat) -> str:
    last = state["messages"][-1]
    return "tools" if getattr(last, "tool_calls", None) else END


chat_builder = StateGraph(Chat)
chat_builder.add_node("agent", agent)
chat_builder.add_node("tools", tools)
chat_builder.add_edge(START, "agent")
chat_builder.add_conditional_edges("agent", route, ["tools", END])
chat_builder.add_edge("tools", "agent")
chat = chat_builder.compile()


def make_chat(config=None):
    """A graph factory, as langgraph.json may name one (it takes an optional config)."""
    return chat_builder.compile()
