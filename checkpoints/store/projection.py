"""Which stored channel values a read decodes: every one, unless its caller shows none.

A history page that leaves values out still needs each checkpoint's own bookkeeping (which
nodes run next, the tasks a Send queued, the joins), but decoding a 10,000-message list per
row for nothing cost a 100-row page 20 s. Inside `values_unread()` the savers decode only
LangGraph's own channels (``__...``, ``branch:...``, ``join:...``) and put `NOT_READ` in place
of every other channel's value: the channel is still there, so the snapshot's ``next`` and
its delta-chain checks see what is stored, and a caller that shows no values loses nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_unread: ContextVar[bool] = ContextVar("checkpoint_values_unread", default=False)


class NotRead:
    """Stands in for a channel value that was stored but, by request, not decoded."""

    _instance: NotRead | None = None

    def __new__(cls) -> NotRead:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "<not read>"


NOT_READ = NotRead()


@contextmanager
def values_unread() -> Iterator[None]:
    """Reads inside leave the graph's own channel values undecoded (`NOT_READ`)."""
    token = _unread.set(True)
    try:
        yield
    finally:
        _unread.reset(token)


def skipping() -> bool:
    """Whether reads now leave the graph's own channel values undecoded."""
    return _unread.get()


def read_now(channel: str) -> bool:
    """Whether a read decodes ``channel``'s value now: always for LangGraph's own."""
    return not _unread.get() or channel.startswith(("__", "branch:", "join:"))
