"""Store-wide locks as lease rows in the store's own database (PostgreSQL and SQLite).

A session-level advisory lock belongs to a server connection, which a transaction-pooling
PgBouncer hands to other clients between transactions: two sweeps ran at once behind it,
and the lock stayed with an idle server connection afterwards. A per-process lock lets two
processes sweep one SQLite file. A lease row works the same everywhere: it is taken in one
statement (insert, or steal a lease that ran out), renewed by its owner between batches,
released only by its owner, and a crashed holder's lease runs out after its TTL (or at once
when the holder was a process on this host that no longer exists).

PostgreSQL leases are timed by the server's clock, so hosts with skewed clocks agree.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connections, transaction

from checkpoints.store.capabilities import HOST, LeaseLost, new_owner
from checkpoints.store.planning import utcnow

TABLE = "checkpoints_storelease"
__all__ = ["HOST", "Holder", "LeaseLost", "Leases", "new_owner"]


@dataclass(frozen=True)
class Holder:
    owner: str
    expires_at: datetime | str


def _dead_local_process(owner: str) -> bool:
    """Whether ``owner`` was a process on this host that no longer exists."""
    host, _, rest = owner.partition(":")
    pid_text = rest.partition(":")[0]
    if host != HOST or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # it exists, as another user's process
    return False


class Leases:
    """Lease rows of the ORM store on database ``using``."""

    def __init__(self, using: str) -> None:
        self.using = using
        self.postgres = connections[using].vendor == "postgresql"

    def _times(self, ttl: float) -> tuple[str, list]:
        """SQL for (now, expiry) and its parameters: the server's clock on PostgreSQL."""
        if self.postgres:
            return (
                "statement_timestamp(), statement_timestamp() + make_interval(secs => %s)",
                [float(ttl)],
            )
        ops = connections[self.using].ops
        now = utcnow()
        return "%s, %s", [
            ops.adapt_datetimefield_value(now),
            ops.adapt_datetimefield_value(now + timedelta(seconds=ttl)),
        ]

    def take(self, name: str, owner: str, ttl: float) -> Holder | None:
        """Take the lease (new, or one that ran out): None when taken, else its holder."""
        times, params = self._times(ttl)
        sql = (
            f"INSERT INTO {TABLE} (name, owner, acquired_at, expires_at) "
            f"VALUES (%s, %s, {times}) "
            "ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, "
            "acquired_at = excluded.acquired_at, expires_at = excluded.expires_at "
            f"WHERE {TABLE}.expires_at < excluded.acquired_at "
            "RETURNING owner"
        )
        found = None
        for _attempt in range(2):
            with transaction.atomic(using=self.using), connections[self.using].cursor() as cur:
                cur.execute(sql, [name, owner, *params])
                if cur.fetchone() is not None:
                    return None
                cur.execute(f"SELECT owner, expires_at FROM {TABLE} WHERE name = %s", [name])
                found = cur.fetchone()
            if found is not None:
                break
            # Released between the two statements: try once more.
        if found is None:
            return Holder("another holder", "")
        holder = Holder(*found)
        if _dead_local_process(holder.owner) and self._steal(name, holder.owner, owner, ttl):
            return None
        return holder

    def _steal(self, name: str, dead: str, owner: str, ttl: float) -> bool:
        """Take the lease from ``dead`` (a process gone from this host), if it still has it."""
        times, params = self._times(ttl)
        first, second = times.split(", ", 1)
        with transaction.atomic(using=self.using), connections[self.using].cursor() as cur:
            cur.execute(
                f"UPDATE {TABLE} SET owner = %s, acquired_at = {first}, expires_at = {second} "
                "WHERE name = %s AND owner = %s",
                [owner, *params, name, dead],
            )
            return cur.rowcount == 1

    def renew(self, name: str, owner: str, ttl: float) -> None:
        """Push the expiry on by ``ttl``; LeaseLost when the lease is no longer ours."""
        times, params = self._times(ttl)
        expiry = times.split(", ", 1)[1]
        params = params[1:] if not self.postgres else params
        with transaction.atomic(using=self.using), connections[self.using].cursor() as cur:
            cur.execute(
                f"UPDATE {TABLE} SET expires_at = {expiry} WHERE name = %s AND owner = %s",
                [*params, name, owner],
            )
            if cur.rowcount == 1:
                return
        raise LeaseLost(
            f"lease {name!r} on database {self.using!r} ran out and was taken by another "
            "holder; stopped so two holders never work at once",
            how="this holder's lease ran out",
        )

    def release(self, name: str, owner: str) -> bool:
        """Drop the lease if it is still ``owner``'s; True when it was."""
        with transaction.atomic(using=self.using), connections[self.using].cursor() as cur:
            cur.execute(f"DELETE FROM {TABLE} WHERE name = %s AND owner = %s", [name, owner])
            return cur.rowcount == 1

    def holder(self, name: str) -> Holder | None:
        with connections[self.using].cursor() as cur:
            cur.execute(f"SELECT owner, expires_at FROM {TABLE} WHERE name = %s", [name])
            found = cur.fetchone()
        return Holder(*found) if found else None
