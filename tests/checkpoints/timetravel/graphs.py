"""The time-travel tests' real LangGraph graphs (deterministic nodes, no LLM).

``build_graph`` and ``build_delta_graph`` for the contract tests; the differential suite's
scenario graphs (test_timetravel_parity.py), which the admin and API tests run too.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage
from langgraph.channels.binop import BinaryOperatorAggregate
from langgraph.channels.delta import DeltaChannel
from langgraph.channels.last_value import LastValue
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Send, interrupt

from checkpoints.timetravel import TimeTravel
from tests.store_helpers import backing_saver, config_for


class State(TypedDict):
    log: Annotated[list, operator.add]
    n: int


def _step(name: str, how):
    def node(state: State) -> dict:
        return {"log": [name], "n": how(state["n"])}

    node.__name__ = name
    return node


def build_graph(store):
    """START -> a (n+1) -> b (n*10) -> END, logging each node in a reducer channel."""
    builder = StateGraph(State)
    builder.add_node("a", _step("a", lambda n: n + 1))
    builder.add_node("b", _step("b", lambda n: n * 10))
    builder.add_edge(START, "a")
    builder.add_edge("a", "b")
    builder.add_edge("b", END)
    return builder.compile(checkpointer=store)


def state_channels():
    return {"log": BinaryOperatorAggregate(list, operator.add), "n": LastValue(int)}


def time_travel(store, graph) -> TimeTravel:
    return TimeTravel(
        backing_saver(store),
        create_channels=state_channels,
        node_subscriptions={name: node.triggers for name, node in graph.nodes.items()},
    )


class DeltaState(TypedDict):
    items: Annotated[
        list, DeltaChannel(lambda state, writes: state + [x for w in writes for x in w])
    ]


def build_delta_graph(store):
    def add(state: DeltaState) -> dict:
        return {"items": [len(state["items"])]}

    builder = StateGraph(DeltaState)
    builder.add_node("add", add)
    builder.add_edge(START, "add")
    builder.add_edge("add", END)
    return builder.compile(checkpointer=store)


# -- scenario graphs: each node records that it ran in ``calls`` ------------------------------
class Log(TypedDict, total=False):
    log: Annotated[list, operator.add]
    answer: Any
    items: list


def appender(name: str, calls: list[str]):
    def node(state: Log) -> dict:
        calls.append(name)
        return {"log": [name]}

    return node


def one_interrupt(saver, calls: list[str]):
    """draft -> approve (asks a human) -> finish: the graph of issue 15."""

    def approve(state: Log) -> dict:
        calls.append("approve")
        answer = interrupt("approve the draft?")
        return {"log": [f"approve:{answer}"], "answer": answer}

    b = StateGraph(Log)
    b.add_node("draft", appender("draft", calls))
    b.add_node("approve", approve)
    b.add_node("finish", appender("finish", calls))
    b.add_edge(START, "draft")
    b.add_edge("draft", "approve")
    b.add_edge("approve", "finish")
    b.add_edge("finish", END)
    return b.compile(checkpointer=saver)


def several_interrupts(saver, calls: list[str]):
    """ask (two questions in one node) -> check (a third) -> END."""

    def ask(state: Log) -> dict:
        calls.append("ask")
        first = interrupt("first?")
        second = interrupt("second?")
        return {"log": [f"ask:{first}:{second}"]}

    def check(state: Log) -> dict:
        calls.append("check")
        return {"log": [f"check:{interrupt('third?')}"]}

    b = StateGraph(Log)
    b.add_node("ask", ask)
    b.add_node("check", check)
    b.add_edge(START, "ask")
    b.add_edge("ask", "check")
    b.add_edge("check", END)
    return b.compile(checkpointer=saver)


def send_fanout(saver, calls: list[str]):
    """plan -> Send('work', item) per item, each worker asks a human -> END."""

    def work(arg: dict) -> dict:
        calls.append(f"work:{arg['item']}")
        answer = interrupt(f"ok {arg['item']}?")
        return {"log": [f"work:{arg['item']}:{answer}"]}

    b = StateGraph(Log)
    b.add_node("plan", appender("plan", calls))
    b.add_node("work", work)
    b.add_edge(START, "plan")
    b.add_conditional_edges(
        "plan", lambda s: [Send("work", {"item": i}) for i in s["items"]], ["work"]
    )
    b.add_edge("work", END)
    return b.compile(checkpointer=saver)


def subgraph_interrupt(saver, calls: list[str]):
    """prep -> sub (s1 -> s2 asks a human) -> after: the interrupt is inside the subgraph."""

    def s2(state: Log) -> dict:
        calls.append("s2")
        return {"log": [f"s2:{interrupt('inside?')}"]}

    inner = StateGraph(Log)
    inner.add_node("s1", appender("s1", calls))
    inner.add_node("s2", s2)
    inner.add_edge(START, "s1")
    inner.add_edge("s1", "s2")
    inner.add_edge("s2", END)

    b = StateGraph(Log)
    b.add_node("prep", appender("prep", calls))
    b.add_node("sub", inner.compile())
    b.add_node("after", appender("after", calls))
    b.add_edge(START, "prep")
    b.add_edge("prep", "sub")
    b.add_edge("sub", "after")
    b.add_edge("after", END)
    return b.compile(checkpointer=saver)


class Chat(TypedDict, total=False):
    messages: Annotated[list, add_messages]
    log: Annotated[list, operator.add]


def reducer_channels(saver, calls: list[str]):
    """user -> bot -> review: two reducer channels (add_messages and operator.add)."""

    def bot(state: Chat) -> dict:
        calls.append("bot")
        n = len(state["messages"])
        return {"messages": [AIMessage(f"reply {n}", id=f"ai-{n}")], "log": ["bot"]}

    def review(state: Chat) -> dict:
        calls.append("review")
        return {"log": [f"review:{interrupt('fine?')}"]}

    b = StateGraph(Chat)
    b.add_node("bot", bot)
    b.add_node("review", review)
    b.add_edge(START, "bot")
    b.add_edge("bot", "review")
    b.add_edge("review", END)
    return b.compile(checkpointer=saver)


def failed_task(saver, calls: list[str]):
    """a -> flaky (fails on its first run) -> c."""

    def flaky(state: Log) -> dict:
        calls.append("flaky")
        if calls.count("flaky") == 1:
            raise RuntimeError("flaky failed once")
        return {"log": ["flaky"]}

    b = StateGraph(Log)
    b.add_node("a", appender("a", calls))
    b.add_node("flaky", flaky)
    b.add_node("c", appender("c", calls))
    b.add_edge(START, "a")
    b.add_edge("a", "flaky")
    b.add_edge("flaky", "c")
    b.add_edge("c", END)
    return b.compile(checkpointer=saver)


def parallel_partial(saver, calls: list[str]):
    """a -> (fast, slow) -> join: fast finishes, slow asks a human, in the same superstep."""

    def slow(state: Log) -> dict:
        calls.append("slow")
        return {"log": [f"slow:{interrupt('slow?')}"]}

    b = StateGraph(Log)
    b.add_node("a", appender("a", calls))
    b.add_node("fast", appender("fast", calls))
    b.add_node("slow", slow)
    b.add_node("join", appender("join", calls))
    b.add_edge(START, "a")
    b.add_edge("a", "fast")
    b.add_edge("a", "slow")
    b.add_edge(["fast", "slow"], "join")
    b.add_edge("join", END)
    return b.compile(checkpointer=saver)


def extend_items(state: list, writes: list) -> list:
    return state + [x for w in writes for x in w]


class DeltaLog(TypedDict, total=False):
    items: Annotated[list, DeltaChannel(extend_items)]


def delta_channel(saver, calls: list[str]):
    """a -> gate (asks) -> b, accumulating in a DeltaChannel kept as a write chain."""

    def step(name: str):
        def node(state: DeltaLog) -> dict:
            calls.append(name)
            return {"items": [f"{name}{len(state['items'])}"]}

        return node

    def gate(state: DeltaLog) -> dict:
        calls.append("gate")
        return {"items": [f"gate:{interrupt('go?')}"]}

    b = StateGraph(DeltaLog)
    b.add_node("a", step("a"))
    b.add_node("gate", gate)
    b.add_node("b", step("b"))
    b.add_edge(START, "a")
    b.add_edge("a", "gate")
    b.add_edge("gate", "b")
    b.add_edge("b", END)
    return b.compile(checkpointer=saver)


def seeded(store, thread_id="t", n=1, metadata=None):
    """A thread with one finished run of the a -> b graph (4 checkpoints)."""
    graph = build_graph(store)
    config = config_for(thread_id)
    if metadata:
        config["metadata"] = metadata
    graph.invoke({"log": [], "n": n}, config)
    return graph, time_travel(store, graph)


def ids(tt, thread_id):
    return [s.checkpoint_id for s in tt.get_state_history(thread_id)]
