"""What a store can do beyond LangGraph's interface, asked of the saver itself.

Retention, the admin and the API ask these instead of checking provider names or saver
classes, so a saver a deployment names in ``CHECKPOINTS["SAVERS"]`` takes part by saying
what it can. The defaults describe a store with no database behind it (memory); the ORM
and Redis savers override what they do better.
"""

from __future__ import annotations

import os
import socket
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime

from checkpoints.channels import INTERRUPT
from checkpoints.errors import CheckpointConfigError, CheckpointStoreError
from checkpoints.store.planning.records import FinishedEntry

HOST = socket.gethostname()
# The thread id an import writes a thread under before copying it into place, on a store
# whose writes of one thread are no one transaction (`Capabilities.staging_id`).
STAGING_PREFIX = "__transfer_staging__:"
# Leases of stores without a server (memory): this process's, by store and name.
_process_leases: dict[str, str] = {}
_process_leases_guard = threading.Lock()


class LockHeld(CheckpointStoreError):
    """Another holder has the named lock of this store; ``how`` says which lock it is."""

    code = "lock_held"
    status = 409

    def __init__(self, message: str, *, how: str = "") -> None:
        super().__init__(message)
        self.how = how


class LeaseLost(LockHeld):
    """The lease ran out and another holder took it; the work under it must stop."""

    code = "lease_lost"


def new_owner() -> str:
    """A lease token naming this holder: host, process and a random part (unique per take)."""
    return f"{HOST}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


class Capabilities:
    """Capabilities with the defaults of a store that has no database behind it."""

    provider: str = ""
    # Owners of threads are recorded (a user per thread), so non-staff see their own.
    records_owners = False
    # The Django database alias holding this store's tables, None when it has none.
    db_alias: str | None = None
    # A parked run can be resumed by any worker (the store is shared across processes).
    can_park = False
    # Everything stored is lost when the process ends, and no other process sees it (a
    # deployment's own saver is taken to keep what it stores).
    process_local = False
    # The store can list threads idle past their waiting horizon itself (`idle_threads`).
    supports_idle_sweep = False
    # Each channel value and pending write is encoded on its own by the serializer, so an
    # import may hand it a value as its stored bytes (`codec.serde.Verbatim`); a store
    # that encodes a whole body at once (memory) would meet the wrapper inside it.
    stores_values_verbatim = False

    # -- naming the store -----------------------------------------------------------------
    @property
    def store_key(self) -> str:
        """A name for the store behind this saver, the same in every saver built on it."""
        return f"{self.provider}:{id(self)}"

    def thread_presence(self, thread_id: str) -> str | None:
        """How this store already knows ``thread_id``, or None when it holds nothing of it.

        Any trace counts (checkpoints in any namespace, pending writes, a finished mark, a
        declared retention): a fork or copy onto such an id would take the thread over.
        """
        thread_id = str(thread_id)
        held = self.thread_holdings(thread_id)
        if held.checkpoints:
            return f"{held.checkpoints} checkpoint(s)"
        if held.writes:
            return f"{held.writes} pending write(s)"
        if self.finished_mark(thread_id) is not None:
            return "a finished mark"
        declared = self.thread_retention(thread_id)
        if declared.waiting_minutes is not None or declared.finished_minutes is not None:
            return "a declared retention"
        return None

    def set_owner(self, thread_id: str, user_pk: int | None) -> None:
        """Record the owner of a thread; a store that records no owners ignores it."""

    # -- format and imports ---------------------------------------------------------------
    def recorded_format(self) -> str:
        """The format generation the store records, read afresh ("none" for a new, empty
        store); raises the store's refusal when it is in another generation. A store that
        lives with the process records none: "memory"."""
        return "memory"

    def staging_id(self, thread_id: str) -> str | None:
        """Where an import writes ``thread_id`` before copying it into place, on a store
        whose writes of a thread are no one transaction; None where they are one."""
        return None

    # -- sweeping -------------------------------------------------------------------------
    def idle_threads(
        self, now: datetime, waiting_minutes: int, *, limit: int | None = None
    ) -> list[str]:
        """Threads whose newest checkpoint is older than their waiting horizon."""
        return list(self.idle_writes(now, waiting_minutes, limit=limit))

    def idle_writes(
        self, now: datetime, waiting_minutes: int, *, limit: int | None = None
    ) -> dict[str, datetime]:
        """`idle_threads` with each one's last write as listed, oldest first: the sweep
        deletes a thread only while its last write is still that one."""
        raise CheckpointConfigError(
            f"the {self.provider} store cannot list idle threads: its keys expire instead"
        )

    def idle_among(
        self, thread_ids: Iterable[str], now: datetime, waiting_minutes: int
    ) -> list[str]:
        """Those of ``thread_ids`` idle past their waiting horizon at ``now`` (in order).

        ``waiting_minutes`` is the platform's horizon, used where a thread declared none.
        A store that cannot tell (`supports_idle_sweep` false) answers none.
        """
        return []

    def reclaim_space(self, *, final: bool = False) -> int | None:
        """Give the space deletes freed back to the file system, a bounded amount a call:
        the sweep calls it after each batch and once more, ``final``, at the end of its run.

        The bytes given back; None where the store does not measure them (the default:
        a store without a file of its own).
        """
        return None

    def compact(self) -> dict:
        """Compact the store (its caller holds the sweep lease) and report the space before
        and after; a store with nothing of its own on disk refuses."""
        raise CheckpointConfigError(
            f"the {self.provider or 'memory'} store has no database file to compact",
            field="provider",
        )

    def write_slots(self, thread_id: str) -> list[tuple] | None:
        """(ns, checkpoint id, task id, task path, idx, channel) of each pending write the
        thread holds, which LangGraph's tuples do not carry whole (an export keeps them);
        None when the store cannot say."""
        return None

    def reseal(self, *, batch_size: int = 500):
        """Rewrite every stored value under the first encryption key, bound to its place,
        batch by batch beside running writers (a `sealing.ResealResult`); a store that
        keeps no sealed bytes refuses."""
        raise CheckpointConfigError(
            f"the {self.provider or 'memory'} store keeps no sealed values to re-seal",
            field="provider",
        )

    def interrupted(self, thread_ids: Iterable[str]) -> set[str]:
        """Threads whose latest root checkpoint holds a pending interrupt (a paused graph)."""
        live = set()
        for thread_id in thread_ids:
            latest = self.get_tuple(  # type: ignore[attr-defined]
                {"configurable": {"thread_id": str(thread_id), "checkpoint_ns": ""}}
            )
            if latest is None:
                continue
            if any(channel == INTERRUPT for _task, channel, _value in latest.pending_writes or ()):
                live.add(str(thread_id))
        return live

    def finished_marks(self, thread_ids: Iterable[str]) -> dict[str, FinishedEntry]:
        """thread id -> its finished mark, for those of ``thread_ids`` that are marked."""
        marks = {str(t): self.finished_mark(str(t)) for t in thread_ids}  # type: ignore[attr-defined]
        return {t: m for t, m in marks.items() if m is not None}

    def last_writes(self, thread_ids: Iterable[str]) -> dict[str, datetime]:
        """thread id -> its last write, for those of ``thread_ids`` the store knows.

        The sweep compares it with a finished mark's time: a thread written since it was
        marked is not swept as finished. Read in one round trip per batch, off the put path.
        """
        return {}

    # -- store-wide leases ----------------------------------------------------------------
    # A lease is held under a token, so work spread over processes (a fanned-out sweep's
    # batches) can renew the lease its run took. Without a server the lease is this
    # process's, keyed on `store_key`.
    def take_lease(self, name: str, token: str) -> None:
        """Take the store-wide lease ``name`` for ``token``, or raise LockHeld at once."""
        key = f"{name}:{self.store_key}"
        with _process_leases_guard:
            held = _process_leases.get(key)
            if held is not None:
                raise LockHeld(
                    f"lock {name!r} on {self.store_key} is held",
                    how=f"this process is sweeping it (lease held by {held})",
                )
            _process_leases[key] = token

    def renew_lease(self, name: str, token: str) -> None:
        """Keep the lease alive; LeaseLost when ``token`` no longer holds it."""
        key = f"{name}:{self.store_key}"
        with _process_leases_guard:
            if _process_leases.get(key) == token:
                return
        raise LeaseLost(
            f"lease {name!r} on {self.store_key} is no longer held by {token}",
            how="this holder's lease was released or taken",
        )

    def release_lease(self, name: str, token: str) -> bool:
        """Drop the lease if ``token`` still holds it; True when it did."""
        key = f"{name}:{self.store_key}"
        with _process_leases_guard:
            if _process_leases.get(key) != token:
                return False
            del _process_leases[key]
            return True

    @contextmanager
    def sweep_lock(self, name: str) -> Iterator[Callable[[], None]]:
        """Hold the store-wide lease ``name`` or raise LockHeld at once.

        Yields a keep-alive to call between batches (it renews an expiring lease).
        """
        token = new_owner()
        self.take_lease(name, token)
        try:
            yield lambda: self.renew_lease(name, token)
        finally:
            self.release_lease(name, token)
