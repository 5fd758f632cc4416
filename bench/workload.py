"""A chat agent's checkpoints: a growing message list, small state, an occasional document."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# The format real graphs write (v4); the base module's helpers stamp v2, whose reads also
# ask for the parent's pending sends (an extra query a graph's own checkpoints never cost).
from langgraph.pregel._checkpoint import create_checkpoint, empty_checkpoint

MESSAGE_BYTES = 300
# Chat agents trim their context; without a window a 1,000-deep thread would measure the
# serializer on a 300 KB list rather than the store.
MESSAGE_WINDOW = 100
SMALL_CHANNELS = (
    "route",
    "intent",
    "user_tier",
    "tool",
    "retries",
    "summary_id",
    "locale",
    "status",
)
DOCUMENT_CHANNEL = "document"
DOCUMENT_EVERY = 25
_WORDS = (
    "agent tool call result user assistant context window token retrieval answer "
    "question document summary plan step graph node channel state memory thread "
    "checkpoint store retention policy sweep latency budget search index vector"
).split()


def text(rng: random.Random, size: int) -> str:
    """Word text of about ``size`` bytes: compressible like real prose, not random bytes."""
    words = []
    total = 0
    while total < size:
        word = rng.choice(_WORDS)
        words.append(word)
        total += len(word) + 1
    return " ".join(words)[:size]


@dataclass(frozen=True)
class Shape:
    """How a workload's threads grow: message size, context window, how often a document."""

    name: str
    message_bytes: int
    # None: no trimming, the message list grows for the life of the thread.
    window: int | None
    # "random": about one step in `document_every`; "fixed": exactly every that many steps.
    document_every: int
    document_rule: str = "random"
    # How many of the eight small channels change in a step after the first (inclusive).
    changes: tuple[int, int] = (1, 3)
    # Pending writes a step's task leaves (one put_writes call carrying them all).
    writes: int = 2
    # "str": the document is a plain string; "dict": {"text": the string}. LangGraph's
    # PostgresSaver inlines str/int/float/bool channel values in every checkpoint row's JSONB
    # (a str document is rewritten and read back with every checkpoint until it changes) and
    # keeps other values as versioned blobs, written only when they change.
    document_as: str = "str"


# The chat agent that trims its context (the first workload).
CHAT = Shape("chat", MESSAGE_BYTES, MESSAGE_WINDOW, DOCUMENT_EVERY)
# The heavier one: a document every 8 steps and an untrimmed message list that grows past
# INLINE_COMPRESS_BYTES (64 KB) at about step 150 of its 200-step thread.
HEAVY = Shape("heavy", 400, None, 8, "fixed")
# The third one (issue 36), the shape of an independent harness's threads: ~300-byte messages
# never trimmed, three or four of the eight small channels changing a step, a document at
# step 0 and every 8 steps, and three pending writes after each put. `bench.run` writes 60
# such threads round-robin, so many threads are live at once. Its document is a dict, not a
# string: PostgresSaver then keeps it as a blob written once per version instead of inlining
# it in every checkpoint row (which is what made chat and heavy's put, list and e2e ratios
# several times the harness's; `bench.live_aspects`).
LIVE = Shape("live", MESSAGE_BYTES, None, 8, "fixed", changes=(3, 4), writes=3, document_as="dict")
SHAPES = {shape.name: shape for shape in (CHAT, HEAVY, LIVE)}
# The channels a task's pending writes go to, in order (a shape takes the first `writes`).
WRITE_CHANNELS = ("messages", "route", "status")


def as_document(text_value: str, shape: Shape) -> Any:
    """The document channel's value in ``shape``'s form (see `Shape.document_as`)."""
    return {"text": text_value} if shape.document_as == "dict" else text_value


class DocumentPool:
    """Large values (64-256 KB) made once, so generating them is not timed."""

    def __init__(self, seed: int = 7, count: int = 6) -> None:
        rng = random.Random(seed)
        self.docs = [text(rng, rng.randint(64, 256) * 1024) for _ in range(count)]

    def pick(self, rng: random.Random) -> str:
        return rng.choice(self.docs)


class ChatThread:
    """One thread's next checkpoints, with versions bumped only for changed channels."""

    def __init__(
        self,
        thread_id: str,
        next_version: Callable[[Any, Any], Any],
        docs: DocumentPool,
        seed: str | None = None,
        shape: Shape = CHAT,
    ) -> None:
        self.thread_id = thread_id
        self.shape = shape
        # Subjects pass the same seed for their copies of a thread, so they store equal data.
        self.rng = random.Random(seed if seed is not None else thread_id)
        self.next_version = next_version
        self.docs = docs
        self.config: dict = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        self.checkpoint = empty_checkpoint()
        self.values: dict[str, Any] = {}
        self.step = -1
        self.messages: list[dict] = []

    def _changes(self) -> dict[str, Any]:
        rng = self.rng
        self.messages = [
            *self.messages,
            {
                "type": "human" if self.step % 2 == 0 else "ai",
                "id": f"{self.thread_id}-m{self.step}",
                # The user asks: a chat's text holds "?" (`bench.graph.QUESTION`).
                "content": text(rng, self.shape.message_bytes - 41)
                + ("?" if self.step % 2 == 0 else "."),
            },
        ]
        if self.shape.window is not None:
            self.messages = self.messages[-self.shape.window :]
        changed: dict[str, Any] = {"messages": self.messages}
        if self.step == 0:
            for name in SMALL_CHANNELS:
                changed[name] = f"{name}-0"
        else:
            for name in rng.sample(SMALL_CHANNELS, rng.randint(*self.shape.changes)):
                changed[name] = f"{name}-{self.step}-{rng.randint(0, 999)}"
        if self.shape.document_rule == "fixed":
            document_now = self.step % self.shape.document_every == 0
        else:
            document_now = self.step == 0 or rng.random() < 1 / self.shape.document_every
        if document_now:
            changed[DOCUMENT_CHANNEL] = as_document(self.docs.pick(rng), self.shape)
        return changed

    def advance(self) -> tuple[dict, dict, dict]:
        """The next (checkpoint, metadata, new_versions) to put after the current head."""
        self.step += 1
        changed = self._changes()
        versions = dict(self.checkpoint["channel_versions"])
        new_versions = {}
        for channel in changed:
            versions[channel] = new_versions[channel] = self.next_version(
                versions.get(channel), None
            )
        self.values.update(changed)
        base = {
            **self.checkpoint,
            "channel_values": dict(self.values),
            "channel_versions": versions,
            "versions_seen": {"agent": {"messages": versions["messages"]}},
        }
        checkpoint = create_checkpoint(base, None, self.step)
        metadata = {
            "source": "input" if self.step == 0 else "loop",
            "step": self.step,
            "parents": {},
        }
        return checkpoint, metadata, new_versions

    def writes(self) -> tuple[list[tuple[str, Any]], str]:
        """The pending writes a task leaves against the current head, and the task id."""
        values = {
            "messages": self.messages[-1],
            "route": f"route-{self.step}",
            "status": f"status-{self.step}",
        }
        return (
            [(channel, values[channel]) for channel in WRITE_CHANNELS[: self.shape.writes]],
            f"task-{self.thread_id}-{self.step}",
        )

    def commit(self, checkpoint: dict, stored: dict) -> None:
        self.checkpoint = checkpoint
        self.config = stored
