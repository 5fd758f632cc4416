"""Scale-out: two service processes on two ports over one database, one graph's calls
sent to them alternately (as a load balancer would): nothing lost, the same history as
InMemorySaver's."""

from __future__ import annotations

import itertools
import threading

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from checkpoints.remote import RemoteSaver
from tests.checkpoints.store.graphs import interrupt_graph, map_reduce_graph, subgraph_graph
from tests.remote.service_process import ServiceProcess


class Alternating(BaseCheckpointSaver):
    """Each call to the next of ``savers`` in turn: a round-robin load balancer."""

    def __init__(self, savers: list[RemoteSaver]) -> None:
        super().__init__(serde=savers[0].serde)
        self.savers = savers
        self.turn = itertools.cycle(savers)
        self.lock = threading.Lock()
        self.calls = {id(s): 0 for s in savers}

    def _next(self) -> RemoteSaver:
        with self.lock:
            saver = next(self.turn)
            self.calls[id(saver)] += 1
            return saver

    def get_tuple(self, config):
        return self._next().get_tuple(config)

    def list(self, config, **kwargs):
        return self._next().list(config, **kwargs)

    def put(self, *args):
        return self._next().put(*args)

    def put_writes(self, *args, **kwargs):
        return self._next().put_writes(*args, **kwargs)

    def get_next_version(self, current, channel=None):
        return self.savers[0].get_next_version(current, channel)


@pytest.fixture
def two_services(tmp_path):
    first = ServiceProcess(tmp_path, "first")
    first.prepare()
    second = ServiceProcess(tmp_path, "second")
    second.token = first.token
    for service in (first, second):
        service.start()
    yield first, second
    for service in (first, second):
        service.stop()


def history(graph, thread_id: str) -> list:
    config = {"configurable": {"thread_id": thread_id}}
    return [(s.values, s.next, s.metadata.get("step")) for s in graph.get_state_history(config)]


def test_two_service_processes_serve_one_graph_alternately(two_services):
    first, second = two_services
    assert first.database == second.database and first.port != second.port
    savers = [RemoteSaver(s.url, api_key=s.token) for s in two_services]
    both = Alternating(savers)
    cases = [
        (interrupt_graph, {"question": "q"}, "a"),
        (subgraph_graph, {"log": []}, "yes"),
        (map_reduce_graph, {"topics": ["x", "y", "z"]}, None),
    ]
    for n, (make, first_input, resume) in enumerate(cases):
        thread = {"configurable": {"thread_id": f"t{n}"}}
        reference = make(InMemorySaver())
        graph = make(both)
        for target in (graph, reference):
            target.invoke(first_input, thread)
            if resume is not None:
                target.invoke(Command(resume=resume), thread)
        expected = history(reference, f"t{n}")
        assert history(graph, f"t{n}") == expected
        # Each process alone reads every checkpoint the pair wrote.
        for saver in savers:
            assert history(make(saver), f"t{n}") == expected
    assert min(both.calls.values()) > 10
