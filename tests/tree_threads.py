"""Threads for the checkpoint tree's tests, written by the chat graph (tests.admin_fixtures)
through the saver and the time-travel service: replays, updates, a rollback, forks."""

from __future__ import annotations

from langchain_core.messages import HumanMessage

from checkpoints.models import Checkpoint
from checkpoints.timetravel import TimeTravel
from tests.admin_fixtures import chat_graph


class Writer:
    """One thread's graph and its moves; every move is LangGraph's own or the service's."""

    def __init__(self, saver, thread_id: str):
        self.saver, self.thread_id = saver, thread_id
        self.graph = chat_graph(saver)
        self.turns = 0

    def config(self, checkpoint_id: str | None = None) -> dict:
        wanted = {"thread_id": self.thread_id}
        if checkpoint_id:
            wanted["checkpoint_id"] = checkpoint_id
        return {"configurable": wanted}

    def count(self) -> int:
        return Checkpoint.objects.filter(thread__thread_id=self.thread_id).count()

    def stored(self) -> list[Checkpoint]:
        """Oldest first."""
        rows = Checkpoint.objects.filter(thread__thread_id=self.thread_id, checkpoint_ns="")
        return list(rows.order_by("checkpoint_id"))

    def ask(self, turns: int = 1) -> None:
        """A turn writes four checkpoints: input, then the loop before, in and after it."""
        for _ in range(turns):
            self.turns += 1
            question = HumanMessage(content=f"question {self.turns}")
            self.graph.invoke({"messages": [question]}, self.config())

    def last_question(self) -> Checkpoint:
        """The newest checkpoint whose next task is the answer (a turn's second)."""
        return [c for c in self.stored() if c.source == "loop"][-3]

    def replay(self, checkpoint_id: str) -> None:
        """Run again from an old checkpoint: its later path is left as a branch."""
        self.graph.invoke(None, self.config(checkpoint_id))

    def update(self, checkpoint_id: str | None = None) -> None:
        config = self.config(checkpoint_id)
        self.graph.update_state(config, {"notes": {"edited": f"at {checkpoint_id or 'head'}"}})

    def rollback(self, checkpoint_id: str) -> None:
        TimeTravel(self.saver).rollback(self.thread_id, checkpoint_id)

    def fork(self, checkpoint_id: str, new_thread_id: str) -> None:
        TimeTravel(self.saver).fork(self.thread_id, checkpoint_id, new_thread_id=new_thread_id)

    def fill(self, total: int) -> None:
        """Turns, then updates at the head, until the thread holds ``total`` checkpoints."""
        while self.count() + 4 <= total:
            self.ask()
        while self.count() < total:
            self.update()


def story_101(saver, thread_id: str = "tree-101") -> dict[str, str]:
    """101 checkpoints: two replays from one checkpoint, an update of an old one, a rollback
    and two forks from one checkpoint, all among the newest 60. Returns the moves' ids."""
    w = Writer(saver, thread_id)
    w.ask(11)
    replayed = w.last_question().checkpoint_id
    w.replay(replayed)
    w.ask()
    w.replay(replayed)
    w.ask()
    updated = w.stored()[-6].checkpoint_id
    w.update(updated)
    w.ask(2)
    target = w.stored()[-5].checkpoint_id
    w.rollback(target)
    w.ask(2)
    forked = w.stored()[-3].checkpoint_id
    w.fork(forked, f"{thread_id}-fork-a")
    w.fork(forked, f"{thread_id}-fork-b")
    w.fill(101)
    return {"replayed": replayed, "updated": updated, "target": target, "forked": forked}


def story_1000(saver, thread_id: str = "tree-1000", branches: int = 50) -> None:
    """1,000 checkpoints, ``branches`` of them left by replays: four turns, then a replay of
    the last one (its answer and review stay behind as a branch), ``branches`` times."""
    w = Writer(saver, thread_id)
    for _ in range(branches):
        w.ask(4)
        w.replay(w.last_question().checkpoint_id)
        w.update()
    w.fill(1000)
