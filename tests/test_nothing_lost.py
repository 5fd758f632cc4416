"""Nothing lost: random interleavings of puts, writes, rollbacks, forks, prunes and sweeps on
every provider, checked after each step against a plain in-memory model of the store."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from checkpoints.store.planning import utcnow
from checkpoints.timetravel import TimeTravel
from retention.sweep import sweep_checkpoints
from tests.reliability_fixtures import put_value
from tests.store_helpers import IN_PROCESS, config_for

NAMES = ["t0", "t1", "t2", "t3/x", "ü"]
SWEEP_AT = 1500  # minutes ahead: past "soon" marks, before "late" ones and the waiting horizon
DUE = {"soon": 10, "late": 3000}
# The same examples every run: the test also demands that every rule ran, and a random draw
# that filled all five names early (no fork can run then) failed it now and then.
RUNS = settings(
    max_examples=25,
    derandomize=True,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)


@dataclass
class ModelThread:
    """What one thread should hold: checkpoint id -> values, and writes per checkpoint."""

    checkpoints: dict[str, dict] = field(default_factory=dict)
    writes: dict[str, list[tuple[str, int]]] = field(default_factory=dict)

    @property
    def ids(self) -> list[str]:
        return sorted(self.checkpoints, reverse=True)

    @property
    def head(self) -> str:
        return self.ids[0]


RULES = {"put", "put_writes", "rollback", "fork", "prune", "mark_finished", "sweep"}


class NothingLost(RuleBasedStateMachine):
    saver = None  # set per provider before the machine runs
    ran: Counter  # rule name -> times it ran, shared by every example of one test

    def __init__(self) -> None:
        super().__init__()
        self.saver.reset_store()
        self.tt = TimeTravel(self.saver)
        self.model: dict[str, ModelThread] = {}
        self.marks: dict[str, int] = {}
        # Marked threads written since their mark (a checkpoint or a task's writes): the run
        # rule spares them.
        self.written: set[str] = set()
        self.counter = 0

    def _next(self) -> int:
        self.counter += 1
        return self.counter

    def _existing(self, data) -> str:
        return data.draw(st.sampled_from(sorted(self.model)))

    # -- rules ----------------------------------------------------------------------------
    @rule(name=st.sampled_from(NAMES))
    def put(self, name):
        self.ran["put"] += 1
        thread = self.model.get(name)
        parent = config_for(name, thread.head, ns="") if thread else None
        values = {"n": self._next(), "who": name}
        stored = put_value(self.saver, name, parent, values)
        cid = stored["configurable"]["checkpoint_id"]
        self.model.setdefault(name, ModelThread()).checkpoints[cid] = values
        if name in self.marks:
            self.written.add(name)

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def put_writes(self, data):
        self.ran["put_writes"] += 1
        name = self._existing(data)
        thread = self.model[name]
        cid = data.draw(st.sampled_from(thread.ids))
        value = self._next()
        task = f"task-{value}"
        self.saver.put_writes(config_for(name, cid, ns=""), [("w", value)], task)
        thread.writes.setdefault(cid, []).append((task, value))
        # A task's writes are writes (an interrupt, a resume): the run rule spares the thread.
        if name in self.marks:
            self.written.add(name)

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def rollback(self, data):
        self.ran["rollback"] += 1
        name = self._existing(data)
        thread = self.model[name]
        target = data.draw(st.sampled_from(thread.ids))
        snapshot = self.tt.rollback(name, target)
        new = snapshot.checkpoint_id
        assert new not in thread.checkpoints and new > thread.head
        thread.checkpoints[new] = dict(thread.checkpoints[target])
        if name in self.marks:
            self.written.add(name)
        # The new head starts with no pending writes, as after LangGraph's update_state
        # (tests/checkpoints/timetravel/test_timetravel_parity.py); the target keeps its own.

    @precondition(lambda self: self.model and len(self.model) < len(NAMES))
    @rule(data=st.data())
    def fork(self, data):
        self.ran["fork"] += 1
        source = self._existing(data)
        thread = self.model[source]
        target = data.draw(st.sampled_from(thread.ids))
        new_name = data.draw(st.sampled_from([n for n in NAMES if n not in self.model]))
        snapshot = self.tt.fork(source, target, new_name)
        # The fork starts with no pending writes, like a rollback's new head.
        fork = ModelThread({snapshot.checkpoint_id: dict(thread.checkpoints[target])})
        self.model[new_name] = fork

    @precondition(lambda self: self.model)
    @rule(data=st.data(), keep=st.integers(min_value=1, max_value=3))
    def prune(self, data, keep):
        self.ran["prune"] += 1
        name = self._existing(data)
        thread = self.model[name]
        doomed = thread.ids[keep:]
        assert self.saver.prune([name], keep_last=keep) == len(doomed)
        for cid in doomed:
            del thread.checkpoints[cid]
            thread.writes.pop(cid, None)

    @precondition(lambda self: self.model)
    @rule(data=st.data(), when=st.sampled_from(sorted(DUE)))
    def mark_finished(self, data, when):
        self.ran["mark_finished"] += 1
        name = self._existing(data)
        self.saver.mark_finished(name, utcnow() + timedelta(minutes=DUE[when]), "model")
        self.marks[name] = DUE[when]
        self.written.discard(name)

    @rule()
    def sweep(self):
        self.ran["sweep"] += 1
        result = sweep_checkpoints(saver=self.saver, now=utcnow() + timedelta(minutes=SWEEP_AT))
        past = sorted(name for name, minutes in self.marks.items() if minutes <= SWEEP_AT)
        due = [name for name in past if name not in self.written]
        spared = sorted(s["thread_id"] for s in result.spared)
        assert result.finished_swept == len(due), (result, due)
        assert result.waiting_swept == 0
        assert spared == [name for name in past if name in self.written], (result, past)
        assert {s["owner"] for s in result.spared} <= {"written-since-finished"}, result
        for name in due:
            del self.model[name]
            del self.marks[name]

    # -- the check ------------------------------------------------------------------------
    @invariant()
    def store_matches_model(self):
        assert sorted(self.saver.threads()) == sorted(self.model)
        for name, thread in self.model.items():
            listed = list(self.saver.list(config_for(name, ns="")))
            assert [t.config["configurable"]["checkpoint_id"] for t in listed] == thread.ids
            for tup in listed:
                cid = tup.config["configurable"]["checkpoint_id"]
                assert tup.checkpoint["channel_values"] == thread.checkpoints[cid], (name, cid)
                got = sorted((w[0], w[2]) for w in tup.pending_writes)
                assert got == sorted(thread.writes.get(cid, [])), (name, cid)
            head = self.saver.get_tuple(config_for(name, ns=""))
            assert head.config["configurable"]["checkpoint_id"] == thread.head
        for name in set(NAMES) - set(self.model):
            assert self.saver.get_tuple(config_for(name, ns="")) is None
        for name in self.model:
            mark = self.saver.finished_mark(name)
            assert (mark is not None) == (name in self.marks), name


# The state machine resets, sweeps, marks and reads marks on the saver it holds (reset_store,
# finished_mark, the sweep): the in-process saver's own extras, on every step.
@pytest.mark.parametrize("provider", IN_PROCESS)
def test_nothing_lost(store):
    ran: Counter = Counter()
    machine = type(
        "NothingLostOn" + store.provider.title(), (NothingLost,), {"saver": store, "ran": ran}
    )
    run_state_machine_as_test(machine, settings=RUNS)
    # Every kind of step ran, so the model was checked against each of them.
    assert set(ran) == RULES, ran
