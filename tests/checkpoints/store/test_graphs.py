"""Real LangGraph graphs (deterministic nodes, no LLM) checkpointed by every provider."""

from __future__ import annotations

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from tests.checkpoints.store.graphs import (
    interrupt_graph,
    linear_graph,
    map_reduce_graph,
    subgraph_graph,
)
from tests.store_helpers import config_for


def checkpoint_ids(graph, config) -> list[str]:
    return [s.config["configurable"]["checkpoint_id"] for s in graph.get_state_history(config)]


# -- reducer channel across invocations --------------------------------------------------
def test_reducer_channel_grows_over_invocations_on_one_thread(store):
    graph = linear_graph(store)
    config = config_for("grow")
    results = [graph.invoke({"log": [f"in{i}"]}, config) for i in (1, 2, 3)]

    assert results[0] == {"log": ["in1", "a", "b"], "runs": 1}
    assert results[1] == {"log": ["in1", "a", "b", "in2", "a", "b"], "runs": 2}
    assert results[2] == {
        "log": ["in1", "a", "b", "in2", "a", "b", "in3", "a", "b"],
        "runs": 3,
    }
    assert graph.get_state(config).values == results[2]
    # input, after-input, after a, after b: four checkpoints per invocation.
    assert len(list(store.list(config))) == 12


# -- interrupt and resume ----------------------------------------------------------------
def test_interrupt_surfaces_and_resumes(store):
    graph = interrupt_graph(store)
    config = config_for("ask")
    first = graph.invoke({"question": "name?"}, config)

    assert first["question"] == "name?"
    [surfaced] = first["__interrupt__"]
    assert surfaced.value == {"question": "name?"}
    waiting = graph.get_state(config)
    assert waiting.next == ("ask",)
    assert waiting.values == {"question": "name?"}
    [task] = waiting.tasks
    assert task.name == "ask"
    assert [i.value for i in task.interrupts] == [{"question": "name?"}]
    assert [i.value for i in waiting.interrupts] == [{"question": "name?"}]
    assert waiting.interrupts[0].id == surfaced.id

    resumed = graph.invoke(Command(resume="Ada"), config)
    assert resumed == {"question": "name?", "answer": "Ada", "greeting": "hello Ada"}
    done = graph.get_state(config)
    assert done.next == ()
    assert done.interrupts == ()
    assert done.values == resumed


# -- subgraph: checkpoints under a child namespace ----------------------------------------
def test_subgraph_checkpoints_live_under_child_namespace(store):
    graph = subgraph_graph(store)
    config = config_for("nested")
    first = graph.invoke({"log": ["start"]}, config)
    assert [i.value for i in first["__interrupt__"]] == ["approve?"]

    state = graph.get_state(config, subgraphs=True)
    assert state.next == ("child",)
    assert state.values == {"log": ["start"]}
    [task] = state.tasks
    child = task.state
    assert child.values == {"log": ["start", "child-1"]}
    assert child.next == ("wait",)
    child_ns = child.config["configurable"]["checkpoint_ns"]
    assert child_ns.startswith("child:")

    under_child = list(store.list(config_for("nested", ns=child_ns)))
    assert under_child, "no checkpoint stored under the child namespace"
    assert {t.config["configurable"]["checkpoint_ns"] for t in under_child} == {child_ns}
    root = list(store.list(config_for("nested", ns="")))
    assert {t.config["configurable"]["checkpoint_ns"] for t in root} == {""}
    everything = list(store.list(config_for("nested")))
    assert len(everything) == len(under_child) + len(root)

    final = graph.invoke(Command(resume="yes"), config)
    assert final == {"log": ["start", "child-1", "child-2:yes", "parent-after"]}
    assert graph.get_state(config, subgraphs=True).tasks == ()


# -- Send fan-out with a reducer ---------------------------------------------------------
def test_send_fan_out_reduces_every_branch(store):
    graph = map_reduce_graph(store)
    config = config_for("map")
    result = graph.invoke({"topics": ["ant", "bee", "cat"]}, config)
    assert result == {
        "topics": ["ant", "bee", "cat"],
        "results": ["ANT", "BEE", "CAT"],
        "summary": "ANT+BEE+CAT",
    }
    assert graph.get_state(config).values == result


# -- history -------------------------------------------------------------------------------
def test_state_history_is_newest_first_with_sources(store):
    graph = linear_graph(store)
    config = config_for("history")
    graph.invoke({"log": ["in"]}, config)
    history = list(graph.get_state_history(config))

    assert [s.metadata["step"] for s in history] == [2, 1, 0, -1]
    assert [s.metadata["source"] for s in history] == ["loop", "loop", "loop", "input"]
    assert [s.next for s in history] == [(), ("b",), ("a",), ("__start__",)]
    assert [s.values for s in history] == [
        {"log": ["in", "a", "b"], "runs": 1},
        {"log": ["in", "a"], "runs": 1},
        {"log": ["in"]},
        {"log": []},
    ]
    ids = [s.config["configurable"]["checkpoint_id"] for s in history]
    assert ids == sorted(ids, reverse=True)
    assert [s.parent_config["configurable"]["checkpoint_id"] for s in history[:-1]] == ids[1:]
    assert history[-1].parent_config is None
    assert len(list(graph.get_state_history(config, limit=2))) == 2


# -- update_state as a node, then continue -----------------------------------------------
def test_update_state_as_node_then_continue(store):
    graph = linear_graph(store, interrupt_before=["b"])
    config = config_for("update")
    assert graph.invoke({"log": ["in"]}, config) == {"log": ["in", "a"], "runs": 1}
    assert graph.get_state(config).next == ("b",)

    updated = graph.update_state(config, {"log": ["manual"]}, as_node="a")
    assert updated["configurable"]["thread_id"] == "update"
    snapshot = graph.get_state(config)
    assert snapshot.values == {"log": ["in", "a", "manual"], "runs": 1}
    assert snapshot.next == ("b",)
    assert snapshot.metadata["source"] == "update"
    assert (
        snapshot.config["configurable"]["checkpoint_id"]
        == (updated["configurable"]["checkpoint_id"])
    )

    assert graph.invoke(None, config) == {"log": ["in", "a", "manual", "b"], "runs": 1}
    assert graph.get_state(config).next == ()


# -- replay from an earlier checkpoint forks the history ----------------------------------
def test_replay_from_earlier_checkpoint_forks_history(store):
    graph = linear_graph(store)
    config = config_for("replay")
    graph.invoke({"log": ["in"]}, config)
    original = list(graph.get_state_history(config))
    after_a = next(s for s in original if s.metadata["step"] == 1)
    old_head = original[0].config["configurable"]["checkpoint_id"]

    replayed = graph.invoke(None, after_a.config)
    assert replayed == {"log": ["in", "a", "b"], "runs": 1}
    after_replay = list(graph.get_state_history(config))
    # Replay copies the step-1 checkpoint as a "fork" on a new branch, then re-runs b there.
    assert [(s.metadata["source"], s.metadata["step"]) for s in after_replay] == [
        ("loop", 3),
        ("fork", 2),
        ("loop", 2),
        ("loop", 1),
        ("loop", 0),
        ("input", -1),
    ]
    assert after_replay[1].values == {"log": ["in", "a"], "runs": 1}
    assert after_replay[1].next == ("b",)

    forked = graph.invoke({"log": ["other"]}, after_a.config)
    assert forked == {"log": ["in", "a", "other", "a", "b"], "runs": 2}
    history = list(graph.get_state_history(config))
    # New input from step 1 adds input, loop, a and b checkpoints on a third branch.
    assert len(history) == len(after_replay) + 4
    assert graph.get_state(config).values == forked
    after_a_id = after_a.config["configurable"]["checkpoint_id"]
    children = [
        (s.metadata["source"], s.values)
        for s in history
        if s.parent_config and s.parent_config["configurable"]["checkpoint_id"] == after_a_id
    ]
    assert sorted(children, key=repr) == sorted(
        [
            ("loop", {"log": ["in", "a", "b"], "runs": 1}),
            ("fork", {"log": ["in", "a"], "runs": 1}),
            ("input", {"log": ["in", "a"], "runs": 1}),
        ],
        key=repr,
    )
    assert old_head in [s.config["configurable"]["checkpoint_id"] for s in history]
    assert graph.get_state(after_a.config).values == {"log": ["in", "a"], "runs": 1}


# -- async path ----------------------------------------------------------------------------
async def test_ainvoke_interrupt_resume_and_history(store):
    graph = interrupt_graph(store)
    config = config_for("async-ask")
    first = await graph.ainvoke({"question": "colour?"}, config)
    assert [i.value for i in first["__interrupt__"]] == [{"question": "colour?"}]
    waiting = await graph.aget_state(config)
    assert waiting.next == ("ask",)
    assert [i.value for i in waiting.interrupts] == [{"question": "colour?"}]

    done = await graph.ainvoke(Command(resume="blue"), config)
    assert done == {"question": "colour?", "answer": "blue", "greeting": "hello blue"}
    history = [s async for s in graph.aget_state_history(config)]
    assert [s.metadata["source"] for s in history][-1] == "input"
    assert history[0].values == done
    assert history[0].next == ()


async def test_ainvoke_reducer_fan_out_and_subgraph(store):
    linear = linear_graph(store)
    config = config_for("async-grow")
    await linear.ainvoke({"log": ["x"]}, config)
    assert await linear.ainvoke({"log": ["y"]}, config) == {
        "log": ["x", "a", "b", "y", "a", "b"],
        "runs": 2,
    }
    fan = map_reduce_graph(store)
    assert (await fan.ainvoke({"topics": ["p", "q"]}, config_for("async-map")))["summary"] == "P+Q"
    nested = subgraph_graph(store)
    nested_config = config_for("async-nested")
    await nested.ainvoke({"log": ["s"]}, nested_config)
    state = await nested.aget_state(nested_config, subgraphs=True)
    assert state.tasks[0].state.values == {"log": ["s", "child-1"]}
    assert await nested.ainvoke(Command(resume="ok"), nested_config) == {
        "log": ["s", "child-1", "child-2:ok", "parent-after"]
    }


# -- differential: same graph, same inputs, LangGraph's own saver -------------------------
def _run_scenarios(saver) -> dict:
    """Drive every graph above through the same inputs; return what can be compared."""
    out = {}
    linear = linear_graph(saver)
    for i in (1, 2):
        linear.invoke({"log": [f"in{i}"]}, config_for("d-linear"))
    ask = interrupt_graph(saver)
    ask.invoke({"question": "q"}, config_for("d-ask"))
    ask.invoke(Command(resume="r"), config_for("d-ask"))
    nested = subgraph_graph(saver)
    nested.invoke({"log": ["s"]}, config_for("d-nested"))
    nested.invoke(Command(resume="go"), config_for("d-nested"))
    fan = map_reduce_graph(saver)
    fan.invoke({"topics": ["x", "y", "z"]}, config_for("d-map"))
    paused = linear_graph(saver, interrupt_before=["b"])
    paused.invoke({"log": ["p"]}, config_for("d-update"))
    paused.update_state(config_for("d-update"), {"log": ["edit"]}, as_node="a")
    paused.invoke(None, config_for("d-update"))
    for thread, graph in (
        ("d-linear", linear),
        ("d-ask", ask),
        ("d-nested", nested),
        ("d-map", fan),
        ("d-update", paused),
    ):
        config = config_for(thread)
        out[thread] = {
            "values": graph.get_state(config).values,
            "checkpoints": len(list(saver.list(config))),
            "history": [
                (s.metadata["source"], s.metadata["step"], s.next, s.values)
                for s in graph.get_state_history(config)
            ],
        }
    return out


def test_same_results_as_langgraph_in_memory_saver(store):
    ours = _run_scenarios(store)
    theirs = _run_scenarios(InMemorySaver())
    assert ours == theirs
