"""The store's pure rules (checkpoints.store.planning) and each store's capabilities."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langgraph.checkpoint.base import empty_checkpoint

from checkpoints.errors import (
    CheckpointDeleteError,
    CheckpointStoreFormatError,
    InvalidCheckpointInput,
    ThreadExists,
)
from checkpoints.store.planning import check_thread_id
from checkpoints.store.planning.copy import CopyOutcome, copy_outcome
from checkpoints.store.planning.delete import DELETE_ROUNDS, DeleteRounds
from checkpoints.store.planning.format import FORMAT_ERROR_HINT, FORMAT_GENERATION, format_verdict
from checkpoints.store.planning.prune import PruneRow, prune_plan
from checkpoints.store.planning.put import plan_put
from checkpoints.store.planning.records import MISSING, ThreadHoldings
from tests.store_helpers import IN_PROCESS


def row(cid, parent=None, delta=(), **versions):
    return PruneRow(cid, parent, frozenset(delta), versions)


# -- prune ----------------------------------------------------------------------------------
def test_prune_keeps_the_newest_and_the_chain_back_to_the_seed():
    # c5 replays "items" from its ancestors until one stores a value (c2, the seed).
    rows = [
        row("c1", None, items="v1"),
        row("c2", "c1", items="v2"),
        row("c3", "c2", items="v3"),
        row("c4", "c3", items="v4"),
        row("c5", "c4", delta=["items"], items="v5"),
    ]
    stored = {("items", "v2")}
    doomed = prune_plan(rows, 1, lambda ch, ver: (ch, ver) in stored)
    assert doomed == ["c1"]


def test_prune_without_delta_channels_keeps_only_the_newest():
    rows = [row(f"c{i}", f"c{i - 1}" if i > 1 else None, x=f"v{i}") for i in range(1, 6)]
    assert prune_plan(rows, 2, lambda ch, ver: True) == ["c3", "c2", "c1"]
    assert prune_plan(rows, 5, lambda ch, ver: True) == []


# -- delete rounds --------------------------------------------------------------------------
def test_delete_rounds_stop_when_every_thread_is_empty():
    rounds = DeleteRounds(["a", "b", "a"], stop_without_progress=False)
    seen = []
    for pending in rounds:
        seen.append(pending)
        gone = rounds.left({"b": ThreadHoldings(1, 0)} if len(seen) == 1 else {})
        assert gone == (["a"] if len(seen) == 1 else ["b"])
    assert seen == [["a", "b"], ["b"]]


def test_delete_rounds_give_up_after_the_limit_naming_the_thread():
    rounds = DeleteRounds(["busy"], stop_without_progress=False)
    with pytest.raises(
        CheckpointDeleteError, match=f"'busy' still holds 1 checkpoint.*{DELETE_ROUNDS}"
    ):
        for _ in rounds:
            rounds.left({"busy": ThreadHoldings(1, 0)})
    assert rounds.round == DELETE_ROUNDS


def test_delete_rounds_without_progress_stop_at_the_second_round():
    rounds = DeleteRounds(["t"], stop_without_progress=True)
    with pytest.raises(CheckpointDeleteError, match="after delete round 2"):
        for _ in rounds:
            rounds.left({"t": ThreadHoldings(1, 1)})


# -- ids, copies, formats, puts -------------------------------------------------------------
@pytest.mark.parametrize(
    ("value", "message"),
    [("", "must not be empty"), ("a\x00b", "NUL"), ("x" * 1025, "1025 bytes long")],
)
def test_the_thread_id_rule_names_the_field(value, message):
    with pytest.raises(InvalidCheckpointInput, match=message) as caught:
        check_thread_id(value, field="new_thread_id")
    assert caught.value.field == "new_thread_id"
    assert str(caught.value).startswith("new_thread_id")


def test_copy_outcome_refuses_only_a_target_holding_checkpoints():
    copy_outcome("a", "b", CopyOutcome.COPIED)
    copy_outcome("a", "b", CopyOutcome.NO_SOURCE)
    with pytest.raises(ThreadExists, match="'a' onto 'b'"):
        copy_outcome("a", "b", CopyOutcome.TARGET_HOLDS)


def test_format_verdict():
    where = "the test store"
    assert format_verdict([], holds_checkpoints=False, where=where) is True
    assert format_verdict([FORMAT_GENERATION], holds_checkpoints=True, where=where) is False
    with pytest.raises(CheckpointStoreFormatError, match="records no format generation"):
        format_verdict([], holds_checkpoints=True, where=where)
    with pytest.raises(CheckpointStoreFormatError) as caught:
        format_verdict([FORMAT_GENERATION - 1], holds_checkpoints=True, where=where)
    assert f"the test store is in format generation {FORMAT_GENERATION - 1}" in str(caught.value)
    assert FORMAT_ERROR_HINT in str(caught.value)


def test_plan_put_splits_the_checkpoint_without_touching_the_metadata():
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"a": 1}
    checkpoint["channel_versions"] = {"a": "1", "gone": "2"}
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": "", "user_id": 7}}
    plan = plan_put(config, checkpoint, {"source": "loop", "step": 2}, {"a": "1", "gone": "2"})
    assert plan.blobs == [("a", "1", 1), ("gone", "2", MISSING)]
    assert plan.metadata == {"source": "loop", "step": 2, "user_id": 7}
    assert plan.owner == "7" and plan.step == 2 and plan.source == "loop"
    assert "channel_values" not in plan.body()
    assert plan.durability is None
    with pytest.raises(InvalidCheckpointInput, match="checkpoint\\['id'\\]"):
        plan_put(config, {**checkpoint, "id": ""}, {}, {})


# -- capabilities ---------------------------------------------------------------------------
EXPECTED = {
    # provider: (records_owners, can_park, supports_idle_sweep, has a database alias)
    "memory": (False, False, False, False),
    "sqlite": (True, False, True, True),
    "postgres": (True, True, True, True),
    "redis": (False, True, False, False),
}


# The in-process saver's own capability flags, store key and sweep lock; a RemoteSaver reports
# the service's through info() (tests/remote).
@pytest.mark.parametrize("provider", IN_PROCESS)
def test_each_store_says_what_it_can(store, provider):
    assert (
        store.records_owners,
        store.can_park,
        store.supports_idle_sweep,
        store.db_alias is not None,
    ) == EXPECTED[provider]
    assert store.store_key.startswith(provider)
    with store.sweep_lock("test-lock") as keep_alive:
        keep_alive()


@pytest.mark.parametrize(
    ("metadata", "field", "message"),
    [
        ({"a": {"b": [1, float("nan")]}}, "metadata.a.b[1]", "which JSON cannot hold"),
        ({"a": {1: "x"}}, "metadata.a", "metadata keys must be strings"),
        ({"a": [{"b": object()}]}, "metadata.a[0].b", "must be JSON data"),
    ],
)
def test_metadata_refusals_name_the_nested_place(metadata, field, message):
    from checkpoints.store.planning.metadata import json_metadata

    with pytest.raises(InvalidCheckpointInput, match=message) as caught:
        json_metadata({"configurable": {"thread_id": "t"}}, metadata)
    assert caught.value.field == field


def test_metadata_is_cleaned_of_nul_characters_at_every_depth():
    from checkpoints.store.planning.metadata import json_metadata

    cleaned = json_metadata(
        {"configurable": {"thread_id": "t"}}, {"k\x00": ["a\x00b", {"c": ("d\x00",)}], "n": None}
    )
    assert cleaned == {"k": ["ab", {"c": ["d"]}], "n": None}


_KEYS = st.sampled_from(["source", "step", "a", "a\x00", "run_id", "thread_id", "__x", "user"])
_JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(alphabet="ab\x00", max_size=3),
)
# Also what the cleaning refuses (NaN, infinity, bytes) or a merge skips.
_SCALARS = st.one_of(_JSON_SCALARS, st.floats(), st.binary(max_size=2))


def _nested(scalars):
    return st.recursive(
        scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3),
            st.tuples(inner),
            st.dictionaries(st.one_of(_KEYS, st.integers(0, 2)), inner, max_size=3),
        ),
        max_leaves=6,
    )


# Mostly storable metadata, so most examples reach the merge rather than a refusal.
_METADATA = st.dictionaries(_KEYS, st.one_of(_JSON_SCALARS, _nested(_JSON_SCALARS)), max_size=4)
_ANY_METADATA = st.dictionaries(_KEYS, _nested(_SCALARS), max_size=4)
_CONFIG = st.dictionaries(_KEYS, st.one_of(_SCALARS, _nested(_SCALARS)), max_size=4)


@settings(max_examples=400, deadline=None)
@given(
    metadata=st.one_of(_METADATA, _METADATA, _ANY_METADATA),
    extra=_CONFIG,
    layered=_CONFIG,
    configurable=_CONFIG,
    chained=st.booleans(),
)
def test_metadata_merge_and_cleaning_match_langgraphs_merge_then_cleaning(
    metadata, extra, layered, configurable, chained
):
    """One pass gives what LangGraph's `get_checkpoint_metadata`, cleaned after, gives: the
    same dict in the same key order, or the same refusal naming the same place."""
    from collections import ChainMap

    from langgraph.checkpoint.base import get_checkpoint_metadata

    from checkpoints.store.planning.metadata import _clean_json, json_metadata

    config = {
        "metadata": ChainMap(extra, layered) if chained else {**layered, **extra},
        "configurable": {**configurable, "thread_id": "t"},
    }

    def outcome(make):
        try:
            return ("ok", list(make().items()))
        except InvalidCheckpointInput as exc:
            return ("refused", exc.field, str(exc))

    expected = outcome(lambda: _clean_json(get_checkpoint_metadata(config, metadata), "metadata"))
    assert outcome(lambda: json_metadata(config, metadata)) == expected
