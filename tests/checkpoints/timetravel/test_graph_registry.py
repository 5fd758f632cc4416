"""Registered graphs (CHECKPOINTS["GRAPHS"]) and bulk updates without one, on every provider."""

from __future__ import annotations

import pytest
from django.core.checks import run_checks
from django.test.utils import override_settings

from checkpoints.errors import CheckpointConfigError, InvalidCheckpointInput
from checkpoints.graphs import load_graph, time_travel_for
from tests.checkpoints.timetravel.graphs import build_delta_graph, build_graph
from tests.store_helpers import config_for

# A module-level builder, as a project registers it: compiled on first use.
builder = build_graph(None).builder

REGISTERED = {"GRAPHS": {"ab": "tests.checkpoints.timetravel.test_graph_registry:builder"}}


def test_without_a_graph_a_reducer_channel_is_refused_and_last_value_ones_apply(store):
    graph = build_graph(store)
    graph.invoke({"log": [], "n": 1}, config_for("t"))
    travel = time_travel_for(store, "t")
    before = [s.checkpoint_id for s in travel.get_state_history("t")]
    with pytest.raises(InvalidCheckpointInput, match=r"channel\(s\) 'log' have a reducer"):
        travel.bulk_update_state("t", [[{"channel": "log", "value": ["x"]}]])
    assert [s.checkpoint_id for s in travel.get_state_history("t")] == before
    # n is last-value: the later of two writes in one step wins.
    snap = travel.bulk_update_state(
        "t", [[{"channel": "n", "value": 5}, {"channel": "n", "value": 7}]]
    )
    assert snap.values == {"log": ["a", "b"], "n": 7}
    assert graph.get_state(config_for("t")).values == snap.values


def test_without_a_graph_a_delta_channel_is_refused(store):
    graph = build_delta_graph(store)
    for _ in range(2):
        graph.invoke({"items": []}, config_for("d"))
    with pytest.raises(InvalidCheckpointInput, match="'items': it is a DeltaChannel"):
        time_travel_for(store, "d").bulk_update_state("d", [[{"channel": "items", "value": [9]}]])


def test_a_registered_graph_named_by_the_thread_metadata_supplies_its_reducers(store):
    graph = build_graph(store)
    config = config_for("t") | {"metadata": {"graph_id": "ab"}}
    graph.invoke({"log": [], "n": 1}, config)
    with override_settings(CHECKPOINTS=REGISTERED):
        travel = time_travel_for(store, "t")
        assert travel.node_subscriptions["b"] == ["branch:to:b"]
        snap = travel.bulk_update_state("t", [[{"channel": "log", "value": ["x"]}]])
    assert snap.values == {"log": ["a", "b", "x"], "n": 20}
    assert graph.get_state(config_for("t")).values == snap.values
    # A thread written by another graph, unregistered, gets the graph-less rules.
    graph.invoke({"log": [], "n": 1}, config_for("other") | {"metadata": {"graph_id": "elsewhere"}})
    with override_settings(CHECKPOINTS=REGISTERED), pytest.raises(InvalidCheckpointInput):
        time_travel_for(store, "other").bulk_update_state(
            "other", [[{"channel": "log", "value": ["x"]}]]
        )


def test_registry_errors_name_the_entry():
    with override_settings(CHECKPOINTS={"GRAPHS": {"bad": "tests.nowhere:graph"}}):
        with pytest.raises(CheckpointConfigError, match=r"\['bad'\].*cannot be loaded"):
            load_graph("bad")
        with pytest.raises(InvalidCheckpointInput, match="'missing' is not registered"):
            load_graph("missing")
    with override_settings(CHECKPOINTS={"GRAPHS": {"bad": "no-colon"}}):
        errors = [e for e in run_checks() if e.id == "checkpoints.E020"]
        assert len(errors) == 1 and "'bad'" in errors[0].msg
