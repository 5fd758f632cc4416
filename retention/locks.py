"""One sweep at a time per store: the store's own lock, named for the sweep.

Each saver says how its store is locked (`StoreSaver.sweep_lock`): a lease row in the
database for PostgreSQL and SQLite, a lock key on Redis, this process's lock for memory.
Here the store's `LockHeld` becomes `SweepAlreadyRunning`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager

from checkpoints.store.capabilities import LockHeld
from checkpoints.store.contract import StoreSaver
from retention.errors import SweepAlreadyRunning

LOCK_NAME = "checkpoint-sweep"


@contextmanager
def sweep_lock(saver: StoreSaver) -> Iterator[Callable[[], None]]:
    """Hold the store's sweep lock, or raise SweepAlreadyRunning at once.

    Yields a keep-alive to call between batches (it renews an expiring lock).
    """
    with ExitStack() as stack:
        try:
            keep_alive = stack.enter_context(saver.sweep_lock(LOCK_NAME))
        except LockHeld as held:
            raise SweepAlreadyRunning(
                f"another sweep is running on the {saver.provider} store ({held.how}); this "
                "one deleted nothing, try again when it ends"
            ) from held
        yield keep_alive
