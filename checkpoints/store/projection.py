"""Which stored channel values a read decodes: every one, unless its caller shows none.

A history page that leaves values out still needs each checkpoint's own bookkeeping (which
nodes run next, the tasks a Send queued, the joins), but decoding a 10,000-message list per
row for nothing cost a 100-row page 20 s. Inside `values_unread()` the savers decode only
LangGraph's own channels (`checkpoints.channels.is_langgraph_channel`) and put `NOT_READ` in
place of every other channel's value: the channel is still there, so the snapshot's
``next`` and its delta-chain checks see what is stored, and a caller that shows no values
loses nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar

from checkpoints.channels import is_langgraph_channel

_unread: ContextVar[bool] = ContextVar("checkpoint_values_unread", default=False)
T = TypeVar("T")


class NotRead:
    """Stands in for a channel value that was stored but, by request, not decoded."""

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


def set_aside(items: list[T], channel_of: Callable[[T], str]) -> tuple[list[T], dict[str, NotRead]]:
    """A checkpoint's stored values (``items``) to decode now, and `NOT_READ` by channel for
    the others: all of them are decoded outside `values_unread()`."""
    if not _unread.get():
        return items, {}
    now: list[T] = []
    unread: dict[str, NotRead] = {}
    for item in items:
        channel = channel_of(item)
        if is_langgraph_channel(channel):
            now.append(item)
        else:
            unread[channel] = NOT_READ
    return now, unread
