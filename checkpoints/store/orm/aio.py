"""The ORM saver's async methods: native on PostgreSQL's hot paths, else Django's thread.

On PostgreSQL the hot paths (aput, aput_writes, aget_tuple, alist, adelete_thread) are
single statements on psycopg's AsyncConnectionPool (one pool per database and event loop),
so concurrent graphs on one loop run their statements side by side. Everything else, and
every path when the native one would differ (SQLite, ``PG_POOL`` off, a standby-wait bound,
``max_checkpoints`` pruning in the put's transaction, a caller's open transaction, an owner
not yet looked up), runs the sync method in Django's sync thread, as before.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

from asgiref.sync import sync_to_async
from django.db import connections
from langgraph.checkpoint.base import CheckpointTuple

from checkpoints.conf import setting
from checkpoints.flows import astream
from checkpoints.store.planning import PutPlan, ThreadHoldings, WritesPlan, config_keys, utcnow

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
    """Async twins of the ORM saver's storage primitives and reads."""

    provider: str
    using: str
    pooled: bool
    max_checkpoints: int

    def _native_async(self) -> bool:
        """Whether the async hot paths may run on the async pool (see the module doc)."""
        return (
            self.provider == "postgres"
            and self.pooled
            and not setting("PG_STANDBY_WAIT_SECONDS")
            # A transaction the caller holds on this thread: its statements must join it.
            and not connections[self.using].in_atomic_block
        )

    async def _in_thread(self, func, *args, **kwargs):
        return await sync_to_async(func, thread_sensitive=True)(*args, **kwargs)

    async def _acall(self, name: str, args: tuple) -> Any:
        native = getattr(self, f"_anative_{name}", None)
        if native is not None and self._native_async():
            return await native(*args)
        return await self._in_thread(self._call, name, args)

    # -- storage primitives ---------------------------------------------------------------
    async def _anative_store_checkpoint(self, plan: PutPlan) -> None:
        if self.max_checkpoints:
            # Pruning runs in the put's transaction, on Django's connection.
            return await self._in_thread(self._store_checkpoint, plan)
        owner = self._owner_cache.get(plan.owner, _MISSING) if plan.owner else None
        if owner is _MISSING:
            owner = await self._in_thread(self._owner_pk, plan.owner)
        row, blobs = self._checkpoint_row(plan, owner)
        # The statement stamps the level its own session commits with (postgres.LEVEL), so
        # the level the store last read for its other callers is not needed here.
        plan.durability = {"level": "", "at": utcnow().isoformat()}
        row["now"] = datetime.fromisoformat(plan.durability["at"])
        row["metadata"] = plan.metadata
        _, plan.durability["level"] = await self._aput_pg(row, blobs)

    async def _anative_store_writes(self, plan: WritesPlan) -> None:
        rows = self._write_rows(plan)
        await self._aput_writes_pg(*self._writes_args(plan, rows))

    async def _anative_delete_threads_round(
        self, thread_ids: list[str]
    ) -> dict[str, ThreadHoldings]:
        await self._adelete_round_pg(thread_ids)
        return {}  # nothing to repeat: see DELETE_THREADS

    async def _anative_forget_threads(self, thread_ids: list[str]) -> None:
        return None  # DELETE_THREADS dropped the marks with the threads

    # -- reads ----------------------------------------------------------------------------
    async def aget_tuple(self, config) -> CheckpointTuple | None:
        if not self._native_async():
            return await self._in_thread(self.get_tuple, config)
        thread_id, ns, checkpoint_id = config_keys(config)
        params = {"thread_id": thread_id, "ns": ns, "checkpoint_id": checkpoint_id}
        found = await self._aget_rows_pg(params)
        return self._tuples(found)[0] if found else None

    async def aget_delta_channel_history(self, *, config, channels):
        return await self._in_thread(
            self.get_delta_channel_history, config=config, channels=channels
        )

    async def alist(
        self, config, *, filter=None, before=None, limit=None
    ) -> AsyncIterator[CheckpointTuple]:
        if self._native_async():
            flow = self._list_flow(config, filter=filter, before=before, limit=limit)
            async for page in astream(flow, lambda request: self._apage_pg(*request)):
                for item in page:
                    yield item
            return
        pages = self._list_pages(config, filter=filter, before=before, limit=limit)
        step = sync_to_async(lambda: next(pages, None), thread_sensitive=True)
        while (page := await step()) is not None:
            for item in page:
                yield item
