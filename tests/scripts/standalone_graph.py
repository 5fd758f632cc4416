"""A LangGraph user's script: ``python standalone_graph.py URL THREAD_ID STEP...``.

Steps: ``start`` runs the graph to its interrupt, ``resume`` answers it, ``async-start`` and
``async-resume`` do the same through ``afrom_conn_string``, ``delete`` removes the thread.
Each step opens the store anew and prints one JSON line, so steps split over two processes
show the state survived the first one.
"""

from __future__ import annotations

import asyncio
import json
import operator
import sys
from typing import Annotated, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from checkpoints import afrom_conn_string, from_conn_string


class State(TypedDict):
    log: Annotated[list[str], operator.add]


def draft(state: State) -> dict:
    return {"log": ["drafted"]}


def approve(state: State) -> dict:
    answer = interrupt({"question": "publish the draft?"})
    return {"log": [f"approved:{answer}"]}


def build(saver):
    builder = StateGraph(State)
    builder.add_node("draft", draft)
    builder.add_node("approve", approve)
    builder.add_edge(START, "draft")
    builder.add_edge("draft", "approve")
    builder.add_edge("approve", END)
    return builder.compile(checkpointer=saver)


def report(step: str, saver, result) -> None:
    result = dict(result or {})
    print(
        json.dumps(
            {
                "step": step,
                "saver": type(saver).__name__,
                "log": result.get("log"),
                "interrupted": "__interrupt__" in result,
            }
        ),
        flush=True,
    )


async def run_async(url: str, config: dict, step: str) -> None:
    async with afrom_conn_string(url) as saver:
        graph = build(saver)
        if step == "async-start":
            result = await graph.ainvoke({"log": ["asked"]}, config)
        else:
            result = await graph.ainvoke(Command(resume="yes"), config)
        report(step, saver, result)


def main(url: str, thread_id: str, steps: list[str]) -> None:
    config = {"configurable": {"thread_id": thread_id}}
    for step in steps:
        if step.startswith("async-"):
            asyncio.run(run_async(url, config, step))
            continue
        with from_conn_string(url) as saver:
            graph = build(saver)
            if step == "start":
                report(step, saver, graph.invoke({"log": ["asked"]}, config))
            elif step == "resume":
                report(step, saver, graph.invoke(Command(resume="yes"), config))
            elif step == "delete":
                saver.delete_thread(thread_id)
                report(step, saver, {"log": [] if saver.get_tuple(config) is None else ["left"]})
            else:
                raise SystemExit(f"unknown step {step!r}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
