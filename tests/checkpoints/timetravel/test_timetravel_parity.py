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

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from checkpoints.timetravel import TimeTravel
from tests.checkpoints.timetravel.graphs import (
    delta_channel,
    failed_task,
    one_interrupt,
    parallel_partial,
    reducer_channels,
    send_fanout,
    several_interrupts,
    subgraph_interrupt,
)
from tests.store_helpers import backing_saver

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
    tt = TimeTravel.for_graph(backing_saver(store), graph)
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
    known = TimeTravel.for_graph(backing_saver(store), graph)
    bare = (
        known
        if knows_graph
        else TimeTravel(backing_saver(store), create_channels=known.create_channels)
    )
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

    TimeTravel.for_graph(backing_saver(store), graph).rollback("t", target_id)
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
    tt = TimeTravel.for_graph(backing_saver(store), graph)
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
        lambda graph, target, ns: TimeTravel.for_graph(backing_saver(store), graph).rollback(
            "ours", target.config["configurable"]["checkpoint_id"], checkpoint_ns=ns
        ),
    )
    for i, (want, have) in enumerate(zip(expected, got, strict=True)):
        assert have == want, f"subgraph rollback differs at step {i}"
