"""The ORM saver's async methods, and its sync ones called from an event loop's thread.

Async calls run the sync method in Django's sync thread (`PostgresStore` runs its hot paths
natively on an async pool instead). Sync calls from a thread whose loop runs (a notebook
cell) run on one off-loop thread, blocking the caller as the peers' savers do.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from asgiref.sync import sync_to_async
from langgraph.checkpoint.base import CheckpointTuple

_MISSING = object()

# Sync calls made on a thread whose event loop runs (a Jupyter cell) would meet Django's
# SynchronousOnlyOperation: they run on this one thread instead, the caller waiting as the
# peers' savers block. One thread: Django's connections are per thread, and a list's pages
# and a flow's primitives then share one, as they do on the caller's thread otherwise.
_off_loop: tuple[int, ThreadPoolExecutor] | None = None
_off_loop_lock = threading.Lock()


def on_loop_thread() -> bool:
    """Whether this thread runs an event loop (the cheap check, no exception raised)."""
    return asyncio._get_running_loop() is not None


def _executor() -> ThreadPoolExecutor:
    global _off_loop
    entry = _off_loop
    if entry is None or entry[0] != os.getpid():  # a forked child has no such thread
        with _off_loop_lock:
            entry = _off_loop
            if entry is None or entry[0] != os.getpid():
                pool = ThreadPoolExecutor(1, thread_name_prefix="checkpoints-off-loop")
                entry = _off_loop = (os.getpid(), pool)
    return entry[1]


def off_loop(func: Callable, *args, **kwargs):
    """``func(*args, **kwargs)`` on the off-loop thread, in the caller's context; blocks."""
    context = contextvars.copy_context()
    return _executor().submit(context.run, func, *args, **kwargs).result()


def iter_off_loop(items: Iterator) -> Iterator:
    """``items`` advanced on the off-loop thread, one step per ``next``."""
    while (item := off_loop(next, items, _MISSING)) is not _MISSING:
        yield item


class OrmAsync:
    """Async twins of the ORM saver's storage requests and reads, in Django's sync thread."""

    async def _in_thread(self, func, *args, **kwargs):
        return await sync_to_async(func, thread_sensitive=True)(*args, **kwargs)

    async def aperform(self, request) -> Any:
        return await self._in_thread(self.perform, request)

    async def aget_tuple(self, config) -> CheckpointTuple | None:
        return await self._in_thread(self.get_tuple, config)

    async def aget_delta_channel_history(self, *, config, channels):
        return await self._in_thread(
            self.get_delta_channel_history, config=config, channels=channels
        )

    async def alist(
        self, config, *, filter=None, before=None, limit=None
    ) -> AsyncIterator[CheckpointTuple]:
        pages = self._list_pages(config, filter=filter, before=before, limit=limit)
        step = sync_to_async(lambda: next(pages, None), thread_sensitive=True)
        while (page := await step()) is not None:
            for item in page:
                yield item
