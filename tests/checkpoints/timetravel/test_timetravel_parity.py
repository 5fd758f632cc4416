"""Differential suite: our rollback and fork against LangGraph's own time travel.

Each scenario builds one graph twice: on LangGraph's ``InMemorySaver`` (the reference) and
on one of our savers (every provider). Both run the same script, pick the same checkpoint
from their history, then travel to it: the reference with
``graph.update_state(that_config, None)``, ours with ``TimeTravel.rollback`` (same thread)
or ``TimeTravel.fork`` (a new thread). After the travel and after each following
``invoke(None)`` / ``Command(resume=...)`` we compare what a user of the graph sees:
``get_state`` (values, next, tasks with their interrupts and errors, subgraph task state,
interrupt values), what the invoke returned or raised, and which nodes ran.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, Send, interrupt

from checkpoints.timetravel import TimeTravel


# -- scenario graphs: each node records that it ran in ``calls`` ------------------------------
class Log(TypedDict, total=False):
    log: Annotated[list, operator.add]
    answer: Any
    items: list


def _appender(name: str, calls: list[str]):
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
    b.add_node("draft", _appender("draft", calls))
    b.add_node("approve", approve)
    b.add_node("finish", _appender("finish", calls))
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
    b.add_node("plan", _appender("plan", calls))
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
    inner.add_node("s1", _appender("s1", calls))
    inner.add_node("s2", s2)
    inner.add_edge(START, "s1")
    inner.add_edge("s1", "s2")
    inner.add_edge("s2", END)

    b = StateGraph(Log)
    b.add_node("prep", _appender("prep", calls))
    b.add_node("sub", inner.compile())
    b.add_node("after", _appender("after", calls))
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
    b.add_node("a", _appender("a", calls))
    b.add_node("flaky", flaky)
    b.add_node("c", _appender("c", calls))
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
    b.add_node("a", _appender("a", calls))
    b.add_node("fast", _appender("fast", calls))
    b.add_node("slow", slow)
    b.add_node("join", _appender("join", calls))
    b.add_edge(START, "a")
    b.add_edge("a", "fast")
    b.add_edge("a", "slow")
    b.add_edge(["fast", "slow"], "join")
    b.add_edge("join", END)
    return b.compile(checkpointer=saver)


def _extend(state: list, writes: list) -> list:
    return state + [x for w in writes for x in w]


class DeltaLog(TypedDict, total=False):
    items: Annotated[list, DeltaChannel(_extend)]


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


# -- scripts ---------------------------------------------------------------------------------
# An action is ("input", value), ("none",), ("resume", value), or ("resume_each", prefix):
# answer every pending interrupt by id with f"{prefix}:{value}".
Action = tuple


@dataclass(frozen=True)
class Scenario:
    name: str
    build: Callable[[Any, list[str]], Any]
    before: list[Action]
    target: Callable[[Any], bool]  # picks the newest matching LangGraph history snapshot
    after: list[Action]


def _next_is(*names: str) -> Callable[[Any], bool]:
    return lambda snap: tuple(sorted(snap.next)) == tuple(sorted(names))


SCENARIOS = [
    Scenario(
        "one_interrupt",
        one_interrupt,
        [("input", {"log": []}), ("resume", "yes")],
        _next_is("approve"),
        [("none",), ("resume", "no")],
    ),
    Scenario(
        "several_interrupts",
        several_interrupts,
        [("input", {"log": []}), ("resume", "1"), ("resume", "2"), ("resume", "3")],
        _next_is("ask"),
        [("none",), ("resume", "x"), ("resume", "y"), ("resume", "z")],
    ),
    Scenario(
        # Travel to the head while the second question is pending: the answer to the
        # first is a pending write there, and LangGraph asks the first question again.
        "several_interrupts_midway",
        several_interrupts,
        [("input", {"log": []}), ("resume", "1")],
        _next_is("ask"),
        [("none",), ("resume", "x"), ("resume", "y"), ("resume", "z")],
    ),
    Scenario(
        "send_fanout",
        send_fanout,
        [("input", {"log": [], "items": [1, 2]}), ("resume_each", "yes")],
        _next_is("work", "work"),
        [("none",), ("resume_each", "again")],
    ),
    Scenario(
        "subgraph_interrupt",
        subgraph_interrupt,
        [("input", {"log": []}), ("resume", "yes")],
        _next_is("sub"),
        [("none",), ("resume", "again")],
    ),
    Scenario(
        "reducer_channels",
        reducer_channels,
        [("input", {"messages": [HumanMessage("hi", id="h-1")], "log": []}), ("resume", "ok")],
        _next_is("bot"),
        [("none",), ("resume", "later")],
    ),
    Scenario(
        "failed_task",
        failed_task,
        [("input", {"log": []})],
        _next_is("flaky"),
        [("none",)],
    ),
    Scenario(
        "parallel_partial",
        parallel_partial,
        [("input", {"log": []})],
        _next_is("fast", "slow"),
        [("none",), ("resume", "done")],
    ),
    Scenario(
        "delta_channel",
        delta_channel,
        [("input", {"items": []}), ("resume", "yes")],
        _next_is("gate"),
        [("none",), ("resume", "again")],
    ),
]


# -- observing what a user of the graph sees -------------------------------------------------
def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if k != "__interrupt__"} | (
            {"__interrupt__": sorted(repr(i.value) for i in value["__interrupt__"])}
            if "__interrupt__" in value
            else {}
        )
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "model_dump"):
        return (type(value).__name__, value.model_dump())
    return value


def _snapshot_view(snap: Any) -> dict[str, Any] | None:
    if snap is None:
        return None
    if not hasattr(snap, "values"):  # a config, when subgraphs=False
        return {"config": True}
    return {
        "values": _plain(snap.values),
        "next": tuple(sorted(snap.next)),
        "tasks": sorted(
            (
                t.name,
                tuple(sorted(repr(i.value) for i in t.interrupts)),
                t.error is not None,
                repr(_snapshot_view(t.state)),
            )
            for t in snap.tasks
        ),
        "interrupts": sorted(repr(i.value) for i in snap.interrupts),
    }


def observe_state(graph, config) -> dict[str, Any]:
    return _snapshot_view(graph.get_state(config, subgraphs=True))


def perform(graph, config, action: Action, calls: list[str]) -> dict[str, Any]:
    """Run one action; what it returned or raised, the nodes it ran, and the state after."""
    calls.clear()
    kind = action[0]
    if kind == "input":
        arg: Any = action[1]
    elif kind == "none":
        arg = None
    elif kind == "resume":
        arg = Command(resume=action[1])
    else:
        pending = graph.get_state(config).interrupts
        arg = Command(resume={i.id: f"{action[1]}:{i.value}" for i in pending})
    try:
        outcome: Any = ("returned", _plain(graph.invoke(arg, config)))
    except Exception as exc:  # noqa: BLE001 - a failing node is part of the scenario
        outcome = ("raised", type(exc).__name__, str(exc))
    return {"outcome": outcome, "ran": sorted(calls), "state": observe_state(graph, config)}


def _target(graph, config, scenario: Scenario):
    return next(s for s in graph.get_state_history(config) if scenario.target(s))


def reference_run(scenario: Scenario) -> list[dict[str, Any]]:
    """LangGraph's own time travel on InMemorySaver: update_state(target, None)."""
    calls: list[str] = []
    graph = scenario.build(InMemorySaver(), calls)
    config = {"configurable": {"thread_id": "ref"}}
    for action in scenario.before:
        perform(graph, config, action, calls)
    target = _target(graph, config, scenario)
    graph.update_state(target.config, None)
    seen = [{"state": observe_state(graph, config)}]
    return seen + [perform(graph, config, action, calls) for action in scenario.after]


def our_run(store, scenario: Scenario, op: str) -> tuple[list[dict[str, Any]], Any]:
    """The same script on ``store``; rollback or fork through TimeTravel."""
    calls: list[str] = []
    graph = scenario.build(store, calls)
    config = {"configurable": {"thread_id": "ours"}}
    for action in scenario.before:
        perform(graph, config, action, calls)
    target = _target(graph, config, scenario)
    target_id = target.config["configurable"]["checkpoint_id"]
    tt = TimeTravel.for_graph(store, graph)
    if op == "rollback":
        snapshot = tt.rollback("ours", target_id)
    else:
        snapshot = tt.fork("ours", target_id, "ours-fork")
        config = {"configurable": {"thread_id": "ours-fork"}}
    seen = [{"state": observe_state(graph, config)}]
    return seen + [perform(graph, config, action, calls) for action in scenario.after], snapshot


@pytest.mark.parametrize("op", ["rollback", "fork"])
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_time_travel_matches_langgraph(store, scenario: Scenario, op: str):
    expected = reference_run(scenario)
    got, snapshot = our_run(store, scenario, op)
    # Step by step, so a failure names the first point where the two differ.
    for i, (want, have) in enumerate(zip(expected, got, strict=True)):
        step = "after the travel" if i == 0 else f"after {scenario.after[i - 1]!r}"
        assert have == want, f"{scenario.name}/{op} differs {step}"
    # Our own snapshot of the new head tells the same story as LangGraph's get_state.
    travelled = expected[0]["state"]
    assert snapshot.pending_writes == [] and snapshot.interrupts == []
    assert tuple(snapshot.next) == travelled["next"]
    assert _plain(snapshot.values) == travelled["values"]


def _stored_view(snap) -> dict[str, Any]:
    """Our snapshot read without the graph, in the shape compared with LangGraph's."""
    return {
        "next": tuple(snap.next),
        "tasks": sorted(
            (t["id"], t["name"], tuple(repr(i["value"]) for i in t["interrupts"]), bool(t["error"]))
            for t in snap.pending_tasks
        ),
        "interrupts": sorted((repr(i["value"]), i["id"], i["node"]) for i in snap.interrupts),
    }


def _langgraph_view(snap) -> dict[str, Any]:
    names = {t.id: t.name for t in snap.tasks}
    return {
        "next": tuple(sorted(snap.next)),
        "tasks": sorted(
            (t.id, t.name, tuple(repr(i.value) for i in t.interrupts), t.error is not None)
            for t in snap.tasks
        ),
        "interrupts": sorted(
            (
                repr(i.value),
                i.id,
                next((names[t.id] for t in snap.tasks if i in t.interrupts), None),
            )
            for i in snap.interrupts
        ),
    }


@pytest.mark.parametrize("knows_graph", [False, True], ids=["stored-only", "registered"])
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_snapshots_match_get_state(store, scenario: Scenario, knows_graph: bool):
    """next, tasks (ids, interrupts, errors) and interrupts (value, id, node) equal
    LangGraph's get_state at every checkpoint: from what is stored alone, and from the
    graph's own nodes when it is known."""
    calls: list[str] = []
    graph = scenario.build(store, calls)
    config = {"configurable": {"thread_id": "bare"}}
    for action in scenario.before:
        perform(graph, config, action, calls)
    known = TimeTravel.for_graph(store, graph)
    bare = known if knows_graph else TimeTravel(store, create_channels=known.create_channels)
    history = list(graph.get_state_history(config))
    # Every scenario pauses or fails somewhere, so interrupts or errors are compared.
    assert any(s.interrupts or any(t.error for t in s.tasks) for s in history)
    for lg in history:
        checkpoint_id = lg.config["configurable"]["checkpoint_id"]
        ours = bare.get_state("bare", checkpoint_id)
        assert _stored_view(ours) == _langgraph_view(lg), f"{scenario.name} at {checkpoint_id}"
        if knows_graph:  # the graph's channels also give the values get_state shows
            assert _plain(ours.values) == _plain(lg.values), f"{scenario.name} at {checkpoint_id}"


def test_the_old_answer_is_not_replayed(store):
    """Issue 15's report, spelled out: after rollback the human is asked again."""
    calls: list[str] = []
    graph = one_interrupt(store, calls)
    config = {"configurable": {"thread_id": "t"}}
    graph.invoke({"log": []}, config)
    assert graph.invoke(Command(resume="yes"), config)["log"] == [
        "draft",
        "approve:yes",
        "finish",
    ]
    before_approve = next(s for s in graph.get_state_history(config) if s.next == ("approve",))
    target_id = before_approve.config["configurable"]["checkpoint_id"]
    target_writes = store.get_tuple(before_approve.config).pending_writes

    TimeTravel.for_graph(store, graph).rollback("t", target_id)
    assert store.get_tuple(config).pending_writes == []
    out = graph.invoke(None, config)
    assert [i.value for i in out["__interrupt__"]] == ["approve the draft?"]
    assert graph.invoke(Command(resume="no"), config)["log"] == [
        "draft",
        "approve:no",
        "finish",
    ]
    # The target itself is untouched: its writes still record the first run.
    assert store.get_tuple(before_approve.config).pending_writes == target_writes


# -- subgraph namespaces ---------------------------------------------------------------------
def _paused_in_subgraph(saver, thread_id: str):
    """The subgraph scenario paused at s2's question; its namespace and its history."""
    calls: list[str] = []
    graph = subgraph_interrupt(saver, calls)
    config = {"configurable": {"thread_id": thread_id}}
    graph.invoke({"log": []}, config)
    sub = graph.get_state(config, subgraphs=True).tasks[0].state
    ns = sub.config["configurable"]["checkpoint_ns"]
    sub_config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns}}
    return graph, calls, config, ns, list(graph.get_state_history(sub_config))


def test_subgraph_namespace_state_and_history_match_langgraph(store):
    graph, _, _, ns, lg_history = _paused_in_subgraph(store, "t")
    tt = TimeTravel.for_graph(store, graph)
    assert tt.namespaces("t") == ["", ns] and ns.startswith("sub:")
    ours = list(tt.get_state_history("t", checkpoint_ns=ns))
    assert [s.checkpoint_id for s in ours] == [
        s.config["configurable"]["checkpoint_id"] for s in lg_history
    ]
    for mine, theirs in zip(ours, lg_history, strict=True):
        assert mine.config["configurable"]["checkpoint_ns"] == ns
        assert _plain(mine.values) == _plain(theirs.values)
        assert _stored_view(mine) == _langgraph_view(theirs)
    head = tt.get_state("t", checkpoint_ns=ns)
    assert head.next == ["s2"] and [i["value"] for i in head.interrupts] == ["inside?"]
    assert tt.get_state("t").next == ["sub"]
    # A subgraph checkpoint forks into the root of a new thread: the subgraph's state alone.
    fork = tt.fork("t", head.checkpoint_id, "sub-alone", checkpoint_ns=ns)
    assert fork.config["configurable"] == {
        "thread_id": "sub-alone",
        "checkpoint_ns": "",
        "checkpoint_id": fork.checkpoint_id,
    }
    assert fork.values == head.values and fork.next == ["s2"] and fork.interrupts == []
    assert tt.namespaces("sub-alone") == [""]


@pytest.mark.parametrize("target_next", [("s1",), ("s2",)])
def test_rollback_inside_a_subgraph_matches_langgraph(store, target_next):
    """update_state on a subgraph checkpoint, then the parent resumes the subgraph from it."""

    def travel_and_continue(saver, thread_id, travel):
        graph, calls, config, ns, history = _paused_in_subgraph(saver, thread_id)
        target = next(s for s in history if s.next == target_next)
        travel(graph, target, ns)
        seen = [{"state": observe_state(graph, config)}]
        actions = [("none",), ("resume", "again")]
        return seen + [perform(graph, config, a, calls) for a in actions]

    expected = travel_and_continue(
        InMemorySaver(), "ref", lambda graph, target, ns: graph.update_state(target.config, None)
    )
    got = travel_and_continue(
        store,
        "ours",
        lambda graph, target, ns: TimeTravel.for_graph(store, graph).rollback(
            "ours", target.config["configurable"]["checkpoint_id"], checkpoint_ns=ns
        ),
    )
    for i, (want, have) in enumerate(zip(expected, got, strict=True)):
        assert have == want, f"subgraph rollback differs at step {i}"
