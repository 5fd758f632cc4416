"""The flow drivers every saver call passes through (`checkpoints.flows`)."""

from __future__ import annotations

import asyncio

import pytest

from checkpoints.flows import Emit, arun, astream, run, stream


def _adds(*numbers):
    total = 0
    for n in numbers:
        total += yield ("add", n)
    return total


def _perform(request):
    kind, n = request
    assert kind == "add"
    return n * 10


def test_run_sends_each_result_back_and_returns_the_flow_result():
    assert run(_adds(1, 2, 3), _perform) == 60
    assert asyncio.run(arun(_adds(1, 2, 3), _aperform)) == 60


async def _aperform(request):
    return _perform(request)


def test_a_flow_that_asks_nothing_returns_at_once():
    def nothing():
        return "done"
        yield  # a generator that never yields

    calls = []
    assert run(nothing(), calls.append) == "done"
    assert asyncio.run(arun(nothing(), _aperform)) == "done"
    assert calls == []


def test_a_failure_of_perform_reaches_the_caller_and_is_no_result():
    def broken(request):
        raise StopIteration  # e.g. next() on an exhausted iterator inside a primitive

    with pytest.raises(StopIteration):
        run(_adds(1), broken)
    with pytest.raises(KeyError):
        run(_adds(1), lambda request: {}["missing"])


def test_streams_hand_out_what_a_flow_emits():
    def emitting():
        got = yield ("add", 1)
        yield Emit(got)
        yield Emit((yield ("add", 2)))

    assert list(stream(emitting(), _perform)) == [10, 20]

    async def collect():
        return [item async for item in astream(emitting(), _aperform)]

    assert asyncio.run(collect()) == [10, 20]
