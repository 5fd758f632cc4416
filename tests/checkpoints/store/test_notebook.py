"""A notebook cell: sync graph calls on a thread whose event loop is running (issue 30).

Jupyter runs every cell inside a running loop, so `graph.invoke(...)` there calls the saver's
sync methods from the loop's thread. LangGraph's own savers just run (blocking); so must ours,
giving what InMemorySaver gives.
"""

from __future__ import annotations

import asyncio
import operator
import os
from pathlib import Path
from typing import Annotated, TypedDict

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from tests.standalone import run_python

ROOT = Path(__file__).resolve().parents[3]


class State(TypedDict):
    items: Annotated[list[str], operator.add]


def _graph(checkpointer):
    builder = StateGraph(State)
    builder.add_node("first", lambda state: {"items": ["first"]})
    builder.add_node("second", lambda state: {"items": ["second"]})
    builder.add_edge(START, "first")
    builder.add_edge("first", "second")
    builder.add_edge("second", END)
    return builder.compile(checkpointer=checkpointer)


def _cell(checkpointer) -> dict:
    """What a notebook cell would do, all sync; the checkpoint ids differ between savers."""
    graph = _graph(checkpointer)
    config = {"configurable": {"thread_id": "nb"}}
    first = graph.invoke({"items": ["a"]}, config)
    state = graph.get_state(config)
    updated = graph.update_state(config, {"items": ["edited"]}, as_node="second")
    second = graph.invoke({"items": ["b"]}, config)
    history = [
        (s.values, s.next, s.metadata["source"], s.metadata["step"])
        for s in graph.get_state_history(config)
    ]
    back = graph.get_state(history and updated)
    return {
        "first": first,
        "state": (state.values, state.next),
        "second": second,
        "history": history,
        "back": back.values,
        "tuples": len(list(checkpointer.list(config))),
    }


async def _in_a_running_loop(checkpointer) -> dict:
    asyncio.get_running_loop()  # as in a Jupyter cell
    return _cell(checkpointer)


def test_sync_graph_calls_inside_a_running_loop_match_inmemorysaver(store):
    expected = asyncio.run(_in_a_running_loop(InMemorySaver()))
    assert asyncio.run(_in_a_running_loop(store)) == expected

    # The store's own sync calls from the loop thread too, prune included (blocking).
    async def maintenance():
        store.put_writes(
            store.get_tuple({"configurable": {"thread_id": "nb"}}).config,
            [("items", ["w"])],
            "task-1",
        )
        return store.prune(["nb"], strategy="keep_latest")

    assert asyncio.run(maintenance()) > 0
    assert len(list(store.list({"configurable": {"thread_id": "nb"}}))) == 1


def test_a_saver_is_its_own_context_manager_as_inmemorysaver_is(store):
    # LangGraph's test_memory opens InMemorySaver with `with` and `async with`.
    with store as opened:
        assert opened is store

    async def in_async_with():
        async with store as opened:
            return opened

    assert asyncio.run(in_async_with()) is store


CELL = """
import asyncio, operator, sys
from typing import Annotated, TypedDict
from langgraph.graph import END, START, StateGraph
from checkpoints import from_conn_string

class S(TypedDict):
    items: Annotated[list, operator.add]

async def cell():  # a Jupyter cell: a running loop, sync calls
    with from_conn_string(sys.argv[1]) as saver:
        builder = StateGraph(S)
        builder.add_node("n", lambda s: {"items": ["n"]})
        builder.add_edge(START, "n")
        builder.add_edge("n", END)
        graph = builder.compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "t"}}
        print(graph.invoke({"items": ["a"]}, config)["items"])
        print(len(list(graph.get_state_history(config))))

asyncio.run(cell())
"""


def test_from_conn_string_on_a_new_sqlite_file_inside_a_running_loop(tmp_path):
    # The report: SqliteSaver ran here, from_conn_string("sqlite:///...") refused.
    url = f"sqlite:///{tmp_path / 'notebook.sqlite3'}"
    done = run_python(["-c", CELL, url], cwd=tmp_path)
    assert done.stdout.split("\n")[:2] == ["['a', 'n']", "3"], done.stdout


KERNEL_CELL = """
import asyncio
import operator
from typing import Annotated, TypedDict
from langgraph.graph import END, START, StateGraph
from checkpoints import from_conn_string

class S(TypedDict):
    items: Annotated[list, operator.add]

builder = StateGraph(S)
builder.add_node("n", lambda s: {"items": ["n"]})
builder.add_edge(START, "n")
builder.add_edge("n", END)
with from_conn_string(URL) as saver:
    graph = builder.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "t"}}
    graph.invoke({"items": ["a"]}, config)
    graph.update_state(config, {"items": ["edited"]}, as_node="n")
    print(graph.get_state(config).values["items"], len(list(graph.get_state_history(config))))
print("loop running:", asyncio._get_running_loop() is not None)
"""


def test_a_real_kernel_runs_the_cell_on_a_sqlite_store(tmp_path):
    # The notebook, for real: ipykernel runs the cell in its event loop's thread.
    from jupyter_client.manager import start_new_kernel

    url = f"sqlite:///{tmp_path / 'kernel.sqlite3'}"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("DJANGO_SETTINGS_MODULE", None)  # the store configures its own Django
    # ipykernel's own "python3" spec: this interpreter, as a notebook server starts it.
    manager, client = start_new_kernel(kernel_name="python3", cwd=str(tmp_path), env=env)
    try:
        outputs, errors = [], []

        def collect(message):
            content = message["content"]
            if message["msg_type"] == "stream":
                outputs.append(content["text"])
            elif message["msg_type"] == "error":
                errors.append("\n".join(content["traceback"]))

        reply = client.execute_interactive(
            f"URL = {url!r}\n" + KERNEL_CELL, timeout=120, output_hook=collect
        )
        assert errors == [] and reply["content"]["status"] == "ok", errors
        # The kernel runs the cell on its event loop's thread, where Django refuses sync ORM
        # calls: the saver's sync methods work there anyway.
        assert "".join(outputs).split("\n")[:2] == ["['a', 'n', 'edited'] 4", "loop running: True"]
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
