"""langgraph-sdk against /langgraph: search's extract, return_minimal, the busy and error
statuses from real runs, and who may create which thread id."""

from __future__ import annotations

import operator
import threading
import time
from typing import Annotated

import httpx
import pytest
from langgraph.graph import START, StateGraph
from langgraph_sdk.errors import ConflictError, NotFoundError, PermissionDeniedError
from typing_extensions import TypedDict

from checkpoints.store.registry import get_saver

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


def test_search_extracts_paths(lg):
    lg.run_graph("x-1")
    client = lg.sync(lg.owner())
    client.threads.update("x-1", metadata={"team": {"name": "blue"}})
    [found] = client.threads.search(
        ids=["x-1"],
        select=["thread_id"],
        extract={
            "last_note": "values.notes[-1]",
            "first_note": "values.notes[0]",
            "team": "metadata.team.name",
            "nothing": "values.notes[99]",
            "missing": "metadata.nope.deeper",
        },
    )
    assert found == {
        "thread_id": "x-1",
        "extracted": {
            "last_note": "review",
            "first_note": "plan checkpoints",
            "team": "blue",
            "nothing": None,
            "missing": None,
        },
    }
    # Without extract, no extracted field.
    assert "extracted" not in client.threads.search(ids=["x-1"])[0]


@pytest.mark.parametrize(
    ("extract", "named"),
    [
        ({"status": "values.topic"}, "'status'"),
        ({"1a": "values.topic"}, "'1a'"),
        ({"a": "runs.x"}, "'runs.x'"),
        ({"a": "values..x"}, "'values..x'"),
        ({"a": "values.x[one]"}, "'values.x[one]'"),
        ({"a": ""}, "'a'"),
        ({f"a{i}": "values.topic" for i in range(11)}, "at most 10"),
    ],
)
def test_a_bad_extract_is_422_naming_it(lg, extract, named):
    r = httpx.post(
        f"{lg.url}/threads/search",
        json={"extract": extract},
        headers={"x-api-key": lg.tokens[lg.owner()]},
    )
    assert r.status_code == 422 and named in r.json()["detail"], r.text
    assert r.json()["field"] == "extract"


def test_update_with_return_minimal(lg):
    client = lg.sync(lg.owner())
    client.threads.create(thread_id="m-1", metadata={"a": 1})
    assert client.threads.update("m-1", metadata={"b": 2}, return_minimal=True) is None
    assert client.threads.get("m-1")["metadata"] == {"a": 1, "b": 2}


class Fan(TypedDict, total=False):
    done: Annotated[list[str], operator.add]


# What the running test wants of ``slow``: released when the test says, failing if asked.
CONTROL: dict = {"release": threading.Event(), "fail": False}


def fast(state: Fan) -> dict:
    return {"done": ["fast"]}


def slow(state: Fan) -> dict:
    assert CONTROL["release"].wait(60), "the test never released the slow task"
    if CONTROL["fail"]:
        raise ValueError("the slow task broke")
    return {"done": ["slow"]}


# Two tasks in one superstep; registered in CHECKPOINTS["GRAPHS"] as "fan" by the test,
# so the API reads the thread's next tasks from this graph.
fan_builder = StateGraph(Fan)
fan_builder.add_node("fast", fast)
fan_builder.add_node("slow", slow)
fan_builder.add_edge(START, "fast")
fan_builder.add_edge(START, "slow")


def own(lg, thread_id: str) -> None:
    if lg.isolates:
        from checkpoints.models import Thread

        Thread.objects.using(get_saver().db_alias).filter(thread_id=thread_id).update(
            owner=lg.users[lg.owner()]
        )


def wait_for_status(client, thread_id: str, wanted: str) -> str:
    """The thread's status once it is ``wanted``, or the last one seen after 60 s."""
    seen = ""
    for _ in range(600):
        try:
            seen = client.threads.get(thread_id)["status"]
        except NotFoundError:
            seen = "absent"
        if seen == wanted:
            break
        time.sleep(0.1)
    return seen


def test_a_run_midway_is_busy_and_a_failed_one_is_error(lg, settings):
    settings.CHECKPOINTS = {
        **settings.CHECKPOINTS,
        "GRAPHS": {"fan": "tests.checkpoints.langgraph_api.test_sdk_more:fan_builder"},
    }
    client = lg.sync(lg.owner())
    graph = fan_builder.compile(checkpointer=get_saver())
    for thread_id, fail in (("busy-1", False), ("fail-1", True)):
        release = CONTROL["release"] = threading.Event()
        CONTROL["fail"] = fail
        config = {"configurable": {"thread_id": thread_id}}
        outcome: list = []

        def run(graph=graph, config=config, outcome=outcome):
            try:
                outcome.append(graph.invoke({"done": []}, config))
            except ValueError as exc:
                outcome.append(exc)

        runner = threading.Thread(target=run)
        runner.start()
        try:
            # The input's checkpoint is written, then fast's writes, while slow still runs.
            for _ in range(600):
                tup = get_saver().get_tuple(config)
                if tup is not None and tup.pending_writes:
                    break
                time.sleep(0.1)
            own(lg, thread_id)
            assert wait_for_status(client, thread_id, "busy") == "busy"
            assert [t["thread_id"] for t in client.threads.search(status="busy")] == [thread_id]
        finally:
            release.set()
            runner.join(60)
        if fail:
            assert isinstance(outcome[0], ValueError)
            assert wait_for_status(client, thread_id, "error") == "error"
            state = client.threads.get_state(thread_id)
            errors = [t["error"] for t in state["tasks"] if t["error"]]
            assert len(errors) == 1 and "the slow task broke" in errors[0]
            assert client.threads.count(status="error") == 1
        else:
            assert outcome[0] == {"done": ["fast", "slow"]}
            assert wait_for_status(client, thread_id, "idle") == "idle"


def test_who_may_create_which_id(lg):
    if lg.isolates:
        another_owners_id_is_taken_but_never_shown(lg)
    else:
        only_staff_create_where_no_owners_are_kept(lg)


def another_owners_id_is_taken_but_never_shown(lg):
    alice, bob = lg.sync("alice"), lg.sync("bob")
    alice.threads.create(thread_id="mine", metadata={"secret": "s"})
    with pytest.raises(ConflictError) as caught:
        bob.threads.create(thread_id="mine")
    assert "secret" not in caught.value.response.text
    # do_nothing returns an existing thread only to whoever may see it.
    with pytest.raises(ConflictError) as caught:
        bob.threads.create(thread_id="mine", if_exists="do_nothing")
    assert "secret" not in caught.value.response.text
    assert alice.threads.create(thread_id="mine", if_exists="do_nothing")["metadata"] == {
        "secret": "s"
    }
    assert alice.threads.get("mine")["metadata"] == {"secret": "s"}


def only_staff_create_where_no_owners_are_kept(lg):
    with pytest.raises(PermissionDeniedError) as caught:
        lg.sync("alice").threads.create(thread_id="orphan")
    detail = caught.value.response.json()["detail"]
    assert "redis" in detail and "only staff" in detail
    assert get_saver().get_tuple({"configurable": {"thread_id": "orphan"}}) is None
    assert lg.sync("staff").threads.create(thread_id="orphan")["thread_id"] == "orphan"
