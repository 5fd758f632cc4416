"""Time travel with real LangGraph graphs on every provider: the graph continues from the
state time travel leaves behind."""

from __future__ import annotations

import pytest

from checkpoints.timetravel import TimeTravel
from tests.checkpoints.timetravel.graphs import build_delta_graph, build_graph, time_travel
from tests.store_helpers import backing_saver, config_for


def history(tt: TimeTravel, thread_id: str) -> list[tuple]:
    return [
        (s.metadata["source"], s.metadata["step"], s.values)
        for s in tt.get_state_history(thread_id)
    ]


def at_step(tt: TimeTravel, thread_id: str, step: int):
    return next(s for s in tt.get_state_history(thread_id) if s.metadata["step"] == step)


def test_rollback_then_invoke_continues_from_target(store):
    graph = build_graph(store)
    tt = time_travel(store, graph)
    assert graph.invoke({"log": [], "n": 1}, config_for("t")) == {"log": ["a", "b"], "n": 20}
    after_a = at_step(tt, "t", 1)
    assert after_a.values == {"log": ["a"], "n": 2} and after_a.next == ["b"]
    old_ids = [s.checkpoint_id for s in tt.get_state_history("t")]

    rolled = tt.rollback("t", after_a.checkpoint_id)
    assert rolled.values == {"log": ["a"], "n": 2}
    assert rolled.next == ["b"]
    assert graph.get_state(config_for("t")).values == {"log": ["a"], "n": 2}
    assert graph.get_state(config_for("t")).next == ("b",)

    # Resuming runs only b, from the target's state.
    assert graph.invoke(None, config_for("t")) == {"log": ["a", "b"], "n": 20}
    # A fresh input starts a new run on top of the restored state.
    assert graph.invoke({"log": ["x"], "n": 5}, config_for("t")) == {
        "log": ["a", "b", "x", "a", "b"],
        "n": 60,
    }
    listed = history(tt, "t")
    assert [(src, step) for src, step, _ in listed] == [
        ("loop", 6),
        ("loop", 5),
        ("loop", 4),
        ("input", 3),
        ("loop", 2),
        ("rollback", 1),
        ("loop", 2),
        ("loop", 1),
        ("loop", 0),
        ("input", -1),
    ]
    assert listed[4][2] == {"log": ["a", "b"], "n": 20}
    # The earlier history is all still there, after the new checkpoints.
    assert [s.checkpoint_id for s in tt.get_state_history("t")][-4:] == old_ids


def test_fork_from_middle_and_continue_both_threads(store):
    graph = build_graph(store)
    tt = time_travel(store, graph)
    graph.invoke({"log": [], "n": 1}, config_for("src"))
    middle = at_step(tt, "src", 1)
    source_before = history(tt, "src")

    fork = tt.fork("src", middle.checkpoint_id, "branch")
    assert fork.values == {"log": ["a"], "n": 2}
    assert fork.next == ["b"]
    assert fork.metadata["parents"] == [middle.checkpoint_id]

    assert graph.invoke(None, config_for("branch")) == {"log": ["a", "b"], "n": 20}
    assert graph.invoke({"log": ["f"], "n": 3}, config_for("branch")) == {
        "log": ["a", "b", "f", "a", "b"],
        "n": 40,
    }
    assert graph.invoke({"log": ["s"], "n": 7}, config_for("src")) == {
        "log": ["a", "b", "s", "a", "b"],
        "n": 80,
    }
    assert [(src, step) for src, step, _ in history(tt, "branch")] == [
        ("loop", 6),
        ("loop", 5),
        ("loop", 4),
        ("input", 3),
        ("loop", 2),
        ("fork", 1),
    ]
    src_now = history(tt, "src")
    assert src_now[4:] == source_before
    assert [(s, step) for s, step, _ in src_now[:4]] == [
        ("loop", 6),
        ("loop", 5),
        ("loop", 4),
        ("input", 3),
    ]


def test_bulk_update_then_graph_reads_reduced_state(store):
    graph = build_graph(store)
    tt = time_travel(store, graph)
    graph.invoke({"log": [], "n": 1}, config_for("t"))
    snap = tt.bulk_update_state(
        "t", [[{"channel": "log", "value": ["m1"]}], [{"channel": "log", "value": ["m2"]}]]
    )
    assert snap.values == {"log": ["a", "b", "m1", "m2"], "n": 20}
    assert graph.get_state(config_for("t")).values == {"log": ["a", "b", "m1", "m2"], "n": 20}
    assert graph.invoke({"log": ["z"], "n": 0}, config_for("t")) == {
        "log": ["a", "b", "m1", "m2", "z", "a", "b"],
        "n": 10,
    }


def test_fork_materialises_delta_channel(store):
    graph = build_delta_graph(store)
    for _ in range(3):
        graph.invoke({"items": []}, config_for("d"))
    assert graph.get_state(config_for("d")).values == {"items": [0, 1, 2]}
    head = store.get_tuple(config_for("d"))
    # The value lives in the write chain, not in the head checkpoint.
    assert "items" not in head.checkpoint["channel_values"]

    spec = graph.channels["items"]
    tt = TimeTravel(backing_saver(store), create_channels=lambda: {"items": spec.copy()})
    assert tt.get_state("d").values == {"items": [0, 1, 2]}
    fork = tt.fork("d", head.config["configurable"]["checkpoint_id"], "d-fork")
    assert fork.values == {"items": [0, 1, 2]}
    stored = store.get_tuple(config_for("d-fork"))
    assert stored.checkpoint["channel_values"]["items"].value == [0, 1, 2]
    assert graph.invoke({"items": []}, config_for("d-fork")) == {"items": [0, 1, 2, 3]}
    assert graph.get_state(config_for("d")).values == {"items": [0, 1, 2]}

    rolled = tt.rollback("d", fork.metadata["parents"][0])
    assert rolled.values == {"items": [0, 1, 2]}
    assert graph.invoke({"items": []}, config_for("d")) == {"items": [0, 1, 2, 3]}

    without_reducer = TimeTravel(backing_saver(store))
    from checkpoints.errors import InvalidCheckpointInput

    chain_head = store.get_tuple(config_for("d"))
    with pytest.raises(InvalidCheckpointInput, match="items"):
        without_reducer.fork("d", chain_head.config["configurable"]["checkpoint_id"], "d-2")
    assert store.get_tuple(config_for("d-2")) is None


@pytest.mark.asyncio
async def test_async_rollback_fork_bulk_with_ainvoke(store):
    graph = build_graph(store)
    tt = time_travel(store, graph)
    assert await graph.ainvoke({"log": [], "n": 1}, config_for("at")) == {
        "log": ["a", "b"],
        "n": 20,
    }
    snaps = [s async for s in tt.aget_state_history("at")]
    middle = next(s for s in snaps if s.metadata["step"] == 1)

    rolled = await tt.arollback("at", middle.checkpoint_id)
    assert rolled.metadata["source"] == "rollback"
    assert await graph.ainvoke(None, config_for("at")) == {"log": ["a", "b"], "n": 20}

    fork = await tt.afork("at", middle.checkpoint_id, "at-fork")
    assert fork.values == {"log": ["a"], "n": 2}
    assert await graph.ainvoke({"log": ["q"], "n": 4}, config_for("at-fork")) == {
        "log": ["a", "q", "a", "b"],
        "n": 50,
    }
    bulk = await tt.abulk_update_state("at-fork", [[{"channel": "n", "value": 9}]])
    assert bulk.values == {"log": ["a", "q", "a", "b"], "n": 9}
    assert (await graph.aget_state(config_for("at-fork"))).values == bulk.values
    assert await tt.alineage("at-fork") == [
        {"thread_id": "at-fork", "checkpoint_id": bulk.checkpoint_id},
        {"thread_id": "at", "checkpoint_id": middle.checkpoint_id},
    ]
