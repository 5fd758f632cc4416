"""The Redis store's ledgers: thread registry, finished marks, versions, declared retention."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime

from redis.exceptions import LockError

from checkpoints.errors import ThreadVersionConflict
from checkpoints.store.capabilities import Capabilities, LeaseLost, LockHeld
from checkpoints.store.planning import utcnow
from checkpoints.store.planning.records import FinishedEntry
from checkpoints.store.planning.retention import ThreadRetention
from checkpoints.store.redis.driver import CAUGHT, Batch, Eval, cmd, single
from checkpoints.store.redis.keys import (
    DUE_KEY,
    MARKS_KEY,
    PAGE,
    REGISTRY_KEY,
    WRITES,
    dec,
    enc,
    lease_key,
    lw_time,
    meta_key,
    namespaces_key,
    now_ms,
    ns_key,
    thread_prefix,
    unpack,
)
from checkpoints.store.redis.scripts import BUMP, RETENTION

# A sweep that dies leaves its lock to expire after this long; a live one renews it.
LOCK_SECONDS = 600


class RedisLedger(Capabilities):
    """Ledger methods and capabilities of `RedisSaver`, over the flows `RedisDriver` runs."""

    # A lease is one key set with its holder's token (SET NX PX): it expires if no holder
    # renews it, and only its token's holders renew or release it. One key, so one slot on
    # a cluster; a server or failover error is StoreUnavailable.
    def _lease(self, name: str, token: str):
        lock = self.client.lock(
            lease_key(name), timeout=LOCK_SECONDS, blocking=False, thread_local=False
        )
        lock.local.token = token.encode()
        return lock

    def take_lease(self, name: str, token: str) -> None:
        lock = self._lease(name, token)
        with self._unavailable():
            acquired = lock.acquire(token=token)
        if not acquired:
            raise LockHeld(
                f"lock {name!r} on redis {self.address} is held",
                how=f"Redis key {lease_key(name)!r} is set",
            )

    def renew_lease(self, name: str, token: str) -> None:
        try:
            with self._unavailable():
                self._lease(name, token).reacquire()
        except LockError as exc:
            raise LeaseLost(
                f"lease {name!r} on redis {self.address} is no longer held by {token}",
                how="this holder's lease ran out",
            ) from exc

    def release_lease(self, name: str, token: str) -> bool:
        try:
            with self._unavailable():
                self._lease(name, token).release()
        except LockError:
            return False
        return True

    @contextmanager
    def _unavailable(self) -> Iterator[None]:
        try:
            yield
        except CAUGHT as exc:
            raise self._fail(exc) from exc

    # -- store-wide views and ledgers -----------------------------------------------------
    def _threads_flow(self, limit: int | None):
        out: list[str] = []
        start = 0
        while limit is None or len(out) < limit:
            (members,) = yield Batch([cmd("ZRANGE", REGISTRY_KEY, start, start + PAGE - 1, "REV")])
            if not members:
                break
            exists = yield Batch([cmd("EXISTS", meta_key(dec(m))) for m in members])
            # A thread whose keys expired leaves a registry entry behind: drop it here.
            stale = [m for m, e in zip(members, exists, strict=True) if not int(e)]
            if stale:
                yield Batch([cmd("ZREM", REGISTRY_KEY, *stale)])
            out += [dec(m) for m, e in zip(members, exists, strict=True) if int(e)]
            start += len(members) - len(stale)
            if len(members) < PAGE:
                break
        return out[:limit] if limit else out

    def threads(self, *, limit: int | None = None) -> list[str]:
        return self._drive(self._threads_flow(limit))

    def mark_finished(self, thread_id: str, due_at: datetime, owner: str = "") -> FinishedEntry:
        entry = FinishedEntry(str(thread_id), utcnow(), due_at, owner or "")
        record = json.dumps(
            {
                "marked_at": entry.marked_at.isoformat(),
                "due_at": due_at.isoformat(),
                "owner": entry.owner,
            }
        )
        key = enc(entry.thread_id)
        self._drive(
            single(
                Batch(
                    [
                        cmd("ZADD", DUE_KEY, due_at.timestamp(), key),
                        cmd("HSET", MARKS_KEY, key, record),
                    ],
                    transaction=True,
                )
            )
        )
        return entry

    def _unmark_flow(self, thread_id: str):
        key = enc(str(thread_id))
        removed, _ = yield Batch(
            [cmd("ZREM", DUE_KEY, key), cmd("HDEL", MARKS_KEY, key)], transaction=True
        )
        return bool(int(removed))

    def unmark_finished(self, thread_id: str) -> bool:
        return self._drive(self._unmark_flow(thread_id))

    def write_slots(self, thread_id: str) -> list[tuple]:
        # Each namespace's WRITES hash: field pack(checkpoint, task, idx) -> pack(task,
        # path, channel, ...).
        rows = []
        for hexed in self.client.smembers(namespaces_key(thread_id)):
            ns = bytes.fromhex(dec(hexed)).decode("utf-8", "surrogatepass")
            key = ns_key(thread_prefix(thread_id), WRITES, dec(hexed))
            for field, value in self.client.hscan_iter(key):
                cid, task_id, idx = (dec(p) for p in unpack(field))
                parts = unpack(value)
                rows.append((ns, cid, task_id, dec(parts[1]), int(idx), dec(parts[2])))
        return rows

    def finished_mark(self, thread_id: str) -> FinishedEntry | None:
        (record,) = self._drive(single(Batch([cmd("HGET", MARKS_KEY, enc(str(thread_id)))])))
        return _entry(str(thread_id), record) if record is not None else None

    def finished_due(self, now: datetime, *, limit: int | None = None) -> list[FinishedEntry]:
        args = ["ZRANGE", DUE_KEY, "-inf", now.timestamp(), "BYSCORE"]
        if limit:
            args += ["LIMIT", 0, limit]
        (members,) = self._drive(single(Batch([cmd(*args)])))
        if not members:
            return []
        (records,) = self._drive(single(Batch([cmd("HMGET", MARKS_KEY, *members)])))
        return [_entry(dec(m), r) for m, r in zip(members, records, strict=True) if r is not None]

    def set_thread_retention(self, thread_id: str, retention: ThreadRetention) -> None:
        thread_id = str(thread_id)

        def text(value):
            return "" if value is None else str(int(value))

        self._drive(
            single(
                Batch(
                    [
                        Eval(
                            RETENTION,
                            thread_id,
                            (
                                self._default_ttl_ms(),
                                enc(thread_id),
                                now_ms(),
                                text(retention.waiting_minutes),
                                text(retention.finished_minutes),
                            ),
                        )
                    ]
                )
            )
        )

    def thread_retention(self, thread_id: str) -> ThreadRetention:
        (found,) = self._drive(single(Batch([cmd("HMGET", meta_key(str(thread_id)), "wm", "fm")])))
        return ThreadRetention(*(None if v is None else int(v) for v in found))

    def finished_marks(self, thread_ids: Iterable[str]) -> dict[str, FinishedEntry]:
        ids = [str(t) for t in thread_ids]
        if not ids:
            return {}
        (records,) = self._drive(single(Batch([cmd("HMGET", MARKS_KEY, *[enc(t) for t in ids])])))
        return {t: _entry(t, r) for t, r in zip(ids, records, strict=True) if r is not None}

    def last_writes(self, thread_ids: Iterable[str]) -> dict[str, datetime]:
        # The thread's own 'lw' (set by the put's script, on the thread's slot), not the
        # registry's score (a separate command that may lag or be lost): the sweep's delete
        # compares this very field (`scripts.DELETE_UNWRITTEN`).
        ids = [str(t) for t in thread_ids]
        if not ids:
            return {}
        found = self._drive(single(Batch([cmd("HGET", meta_key(t), "lw") for t in ids])))
        return {t: lw_time(ms) for t, ms in zip(ids, found, strict=True) if ms is not None}

    def thread_version(self, thread_id: str) -> int:
        (found,) = self._drive(single(Batch([cmd("HGET", meta_key(str(thread_id)), "v")])))
        return int(found) if found is not None else 0

    def bump_thread_version(self, thread_id: str, expected: int | None = None) -> int:
        thread_id = str(thread_id)
        arg = "" if expected is None else str(int(expected))
        ((bumped, version),) = self._drive(single(Batch([Eval(BUMP, thread_id, (arg,))])))
        if not int(bumped):
            raise ThreadVersionConflict(
                f"thread {thread_id!r} is at version {int(version)}, not {expected}: "
                "it changed since it was read"
            )
        return int(version)


def _entry(thread_id: str, record: bytes) -> FinishedEntry:
    data = json.loads(record)
    return FinishedEntry(
        thread_id,
        datetime.fromisoformat(data["marked_at"]),
        datetime.fromisoformat(data["due_at"]),
        data.get("owner") or "",
    )
