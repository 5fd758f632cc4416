"""Drive a flow written once, with sync or async I/O (the store and time travel use it).

A *flow* is a generator that yields requests for I/O and is sent back each result;
``yield Emit(x)`` hands ``x`` to the caller instead (a streaming flow). The drivers here
know nothing of what a request means: they are given ``perform`` (sync) or ``aperform``
(async), which fulfil one request. So an operation's steps are written once and only the
few lines that call the saver differ between its sync and async forms.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")
Flow = Generator[Any, Any, T]


@dataclass(frozen=True)
class Emit:
    """A streaming flow's next item, handed to the caller rather than to ``perform``."""

    value: Any


def stream(flow: Flow[Any], perform: Callable[[Any], Any]) -> Iterator[Any]:
    """Fulfil ``flow``'s requests with ``perform``, yielding what it emits."""
    reply = None
    while True:
        try:
            request = flow.send(reply)
        except StopIteration:
            return
        if isinstance(request, Emit):
            yield request.value
            reply = None
        else:
            reply = perform(request)


async def astream(flow: Flow[Any], aperform: Callable[[Any], Awaitable[Any]]) -> AsyncIterator[Any]:
    """Fulfil ``flow``'s requests with ``aperform``, yielding what it emits."""
    reply = None
    while True:
        try:
            request = flow.send(reply)
        except StopIteration:
            return
        if isinstance(request, Emit):
            yield request.value
            reply = None
        else:
            reply = await aperform(request)


def run(flow: Flow[T], perform: Callable[[Any], Any]) -> T:
    """Drive a flow that returns (and emits nothing) to its result."""
    # Driven here, not through `stream`: every saver call passes this way, and the
    # streaming driver's extra generator cost a few microseconds a call. Only the flow's
    # own StopIteration ends it: one escaping ``perform`` is an error, not a result.
    try:
        request = next(flow)
    except StopIteration as done:
        return done.value
    while True:
        reply = perform(request)
        try:
            request = flow.send(reply)
        except StopIteration as done:
            return done.value


async def arun(flow: Flow[T], aperform: Callable[[Any], Awaitable[Any]]) -> T:
    """Async twin of :func:`run`."""
    try:
        request = next(flow)
    except StopIteration as done:
        return done.value
    while True:
        reply = await aperform(request)
        try:
            request = flow.send(reply)
        except StopIteration as done:
            return done.value
