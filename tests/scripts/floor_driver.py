"""Run inside a venv holding LangGraph's floor versions and our wheel: conformance on the
memory and SQLite stores, and a graph that interrupts and resumes. Prints one JSON line."""

from __future__ import annotations

import asyncio
import json
import sys
from importlib.metadata import version
from typing import TypedDict

from langgraph.checkpoint.conformance import validate
from langgraph.checkpoint.conformance.initializer import RegisteredCheckpointer
from langgraph.checkpoint.conformance.report import ProgressCallbacks
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from checkpoints import from_conn_string


class State(TypedDict):
    log: list[str]


def ask(state: State) -> State:
    answer = interrupt("approve?")
    return {"log": [*state["log"], f"approved:{answer}"]}


def conformance(saver) -> dict:
    async def factory():
        yield saver

    failures: list[str] = []

    def on_result(capability, test_name, passed, error):
        if not passed:
            failures.append(f"{capability}.{test_name}: {error}")

    report = asyncio.run(
        validate(
            RegisteredCheckpointer(name="floor", factory=factory),
            progress=ProgressCallbacks(on_test_result=on_result),
        )
    )
    passed = sum(r.tests_passed for r in report.results.values())
    return {"passed": passed, "failures": failures}


def main() -> None:
    out = {"langgraph": version("langgraph"), "checkpoint": version("langgraph-checkpoint")}
    for url in ("memory://", f"sqlite:///{sys.argv[1]}"):
        with from_conn_string(url) as saver:
            graph = StateGraph(State)
            graph.add_node("ask", ask)
            graph.add_edge(START, "ask")
            graph.add_edge("ask", END)
            app = graph.compile(checkpointer=saver)
            config = {"configurable": {"thread_id": "floor"}}
            app.invoke({"log": ["start"]}, config)
            final = app.invoke(Command(resume="yes"), config)
            out[url.split(":")[0]] = {"graph": final["log"], **conformance(saver)}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
