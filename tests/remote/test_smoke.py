import pytest
from langgraph.checkpoint.base import empty_checkpoint

from tests.remote.backing import BACKINGS, service_on
from tests.store_helpers import config_for, make_saver, put_chain


@pytest.mark.django_db(transaction=True)
def test_round_trip(request):
    saver = make_saver(request, "remote")
    config = put_chain(saver, "t1", {"a": {"x": [1, 2]}, "b": "text"}, steps=2)
    saver.put_writes(config, [("a", 5), ("b", "w")], "task-1")
    tup = saver.get_tuple(config_for("t1"))
    assert tup.checkpoint["channel_values"] == {"a": {"x": [1, 2]}, "b": "text"}
    assert tup.pending_writes == [("task-1", "a", 5), ("task-1", "b", "w")]
    assert len(list(saver.list(config_for("t1")))) == 2
    assert saver.provider == "sqlite"
    saver.delete_thread("t1")
    assert saver.get_tuple(config_for("t1")) is None
    assert empty_checkpoint


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("backing", BACKINGS)
@pytest.mark.parametrize("path", ["async", "sync"])
def test_conformance(request, path, backing):
    from tests.conformance import run_suite

    remote, _ = service_on(request, backing)
    run_suite(remote, f"remote-{backing}", path)
