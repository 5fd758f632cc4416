"""Real graphs that leave varied threads: interrupts, a subgraph, reducers, sends, a big value."""

from __future__ import annotations

import operator
from typing import Annotated, TypedDict

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, Send, interrupt

BIG = "x" * 100_000


class ChildState(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    answer: str


def _child_ask(state: ChildState) -> dict:
    first = interrupt({"question": "name?"})
    # A second question after the first answer: the thread is resumed and asked again.
    second = interrupt({"question": f"really {first}?"}) if first == "again" else first
    return {"log": [f"child:{second}"], "answer": str(second)}


def child_graph():
    builder = StateGraph(ChildState)
    builder.add_node("ask", _child_ask)
    builder.add_edge(START, "ask")
    builder.add_edge("ask", END)
    return builder.compile()


class State(TypedDict, total=False):
    messages: Annotated[list, add_messages]
    log: Annotated[list[str], operator.add]
    answer: str
    big: str
    fan: int


def _hello(state: State) -> dict:
    n = len(state.get("messages") or [])
    return {"messages": [HumanMessage(content=f"hi {n}", id=f"h{n}")], "log": ["hello"]}


def _fan_out(state: State):
    return [Send("worker", {"fan": i}) for i in range(3)]


def _worker(state: State) -> dict:
    return {"log": [f"w{state['fan']}"]}


def _reply(state: State) -> dict:
    n = len(state.get("messages") or [])
    return {"messages": [AIMessage(content=f"ok {state.get('answer')}", id=f"a{n}")]}


def build(checkpointer):
    builder = StateGraph(State)
    builder.add_node("hello", _hello)
    builder.add_node("worker", _worker)
    builder.add_node("child", child_graph())
    builder.add_node("reply", _reply)
    builder.add_edge(START, "hello")
    builder.add_conditional_edges("hello", _fan_out, ["worker"])
    builder.add_edge("worker", "child")
    builder.add_edge("child", "reply")
    builder.add_edge("reply", END)
    return builder.compile(checkpointer=checkpointer)


THREADS = ("t-done", "t-waiting", "t-reasked", "t-big", "t-again-waiting")


def seed(checkpointer) -> None:
    """Write every thread the tests compare, through the real engine."""
    graph = build(checkpointer)

    def conf(thread_id):
        return {"configurable": {"thread_id": thread_id, "user_id": "alice"}}

    graph.invoke({"messages": [], "log": []}, conf("t-done"))
    graph.invoke(Command(resume="bob"), conf("t-done"))
    graph.invoke({"messages": [], "log": []}, conf("t-waiting"))
    graph.invoke({"messages": [], "log": []}, conf("t-reasked"))
    graph.invoke(Command(resume="again"), conf("t-reasked"))
    graph.invoke(Command(resume="carol"), conf("t-reasked"))
    graph.invoke({"messages": [], "log": [], "big": BIG}, {"configurable": {"thread_id": "t-big"}})
    graph.invoke({"messages": [], "log": []}, conf("t-again-waiting"))
    graph.invoke(Command(resume="again"), conf("t-again-waiting"))


def resume(checkpointer, thread_id: str, answer: str):
    return build(checkpointer).invoke(
        Command(resume=answer), {"configurable": {"thread_id": thread_id}}
    )


def copy_rows(peer, copies: int, skip: str = "t-big") -> dict[str, int]:
    """Copy every seeded thread's rows but ``skip``'s under ``copies`` new ids each, in SQL
    on the peer's own tables: thread -> its checkpoints."""
    sqlite = type(peer).__name__ == "SqliteSaver"
    if sqlite:
        tables = ("checkpoints", "writes")
        cols = {t: [r[1] for r in peer.conn.execute(f"PRAGMA table_info({t})")] for t in tables}
        series = (
            "(WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < ?) "
            "SELECT n FROM s) AS g"
        )
        mark = "?"
    else:
        tables = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")
        found = "SELECT column_name FROM information_schema.columns WHERE table_name = %s"
        cols = {
            t: [r["column_name"] for r in peer.conn.execute(found, (t,)).fetchall()] for t in tables
        }
        series, mark = "generate_series(1, %s) AS g(n)", "%s"
    for table in tables:
        rest = ", ".join(c for c in cols[table] if c != "thread_id")
        peer.conn.execute(
            f"INSERT INTO {table} (thread_id, {rest}) SELECT 'c' || g.n || '-' || thread_id, "
            f"{rest} FROM {table}, {series} WHERE thread_id <> {mark}",
            (copies, skip),
        )
    if sqlite:
        peer.conn.commit()
    rows = peer.conn.execute(
        "SELECT thread_id, count(*) AS n FROM checkpoints GROUP BY thread_id"
    ).fetchall()
    return dict(rows) if sqlite else {r["thread_id"]: r["n"] for r in rows}
