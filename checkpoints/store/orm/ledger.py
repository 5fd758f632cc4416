"""The ORM store's ledgers and capabilities: threads, finished marks, versions, retention.

A mixin of `OrmSaver`: everything here is plain ORM on the ``Thread``, ``FinishedMark``
and ``StoreFormat`` tables, including what retention, the admin and the API ask of the
store (idle threads, interrupted threads, owners, the sweep lock) so none of them queries
these tables behind the saver's back.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from django.db import DatabaseError, connections, transaction
from django.db.models import F

from checkpoints.conf import setting
from checkpoints.errors import CheckpointConfigError, ThreadVersionConflict
from checkpoints.models import ChannelBlob, FinishedMark, PendingWrite, StoreFormat, Thread
from checkpoints.models import Checkpoint as CheckpointRow
from checkpoints.store.capabilities import INTERRUPT, Capabilities, LockHeld
from checkpoints.store.diagnosis import (
    database_setting,
    database_value,
    diagnose_database,
    one_line,
)
from checkpoints.store.orm.internals import raw_delete
from checkpoints.store.orm.lease import Leases
from checkpoints.store.planning import utcnow
from checkpoints.store.planning.format import FORMAT_GENERATION, format_verdict
from checkpoints.store.planning.records import FinishedEntry
from checkpoints.store.planning.retention import ThreadRetention


def find_user(value: str, *, using: str = "default", only_pk: bool = False) -> Any:
    """A user by primary key (an all-digit value), else by username; None when none.

    The one rule for naming a user: a put's ``user_id`` and the API's ``owner`` filter.
    """
    from django.contrib.auth import get_user_model

    model = get_user_model()
    users = model.objects.using(using)
    if only_pk:
        users = users.only("pk")
    found = None
    if value.isdigit():
        found = users.filter(pk=int(value)).first()
    return found or users.filter(**{model.USERNAME_FIELD: value}).first()


_format_checked: set[str] = set()
_format_lock = threading.Lock()


def forget_format_checks() -> None:
    """Make the next saver built on each database check the format generation again."""
    _format_checked.clear()


class OrmLedger(Capabilities):
    """Ledgers and capabilities over the ORM tables of database ``self.using``."""

    using: str
    records_owners = True
    supports_idle_sweep = True

    @property
    def db_alias(self) -> str:
        return self.using

    @property
    def store_key(self) -> str:
        entry = connections[self.using].settings_dict
        where = f"{entry.get('HOST') or ''}:{entry.get('PORT') or ''}"
        return f"{self.provider}:{where}:{entry['NAME']}"

    def thread_presence(self, thread_id: str) -> str | None:
        # Every trace but a finished mark hangs off a Thread row: an absent thread (what
        # an import asks of each one) is answered in one query.
        with connections[self.using].cursor() as cur:
            cur.execute(
                f"SELECT EXISTS (SELECT 1 FROM {Thread._meta.db_table} WHERE thread_id = %s) "
                f"OR EXISTS (SELECT 1 FROM {FinishedMark._meta.db_table} WHERE thread_id = %s)",
                [str(thread_id), str(thread_id)],
            )
            if not cur.fetchone()[0]:
                return None
        found = super().thread_presence(thread_id)
        if found is None and Thread.objects.using(self.using).filter(thread_id=thread_id).exists():
            # A Thread row alone (an owner recorded, a retention declared and cleared).
            return "a thread record"
        return found

    def take_lease(self, name: str, token: str) -> None:
        """A lease row in the store's own database (see `lease`): held across processes
        and hosts and behind a transaction pooler, renewed by its token's holders, released
        only while still ``token``'s, and run out after ``SWEEP_LEASE_SECONDS`` when no
        holder renews it."""
        holder = Leases(self.using).take(name, token, float(setting("SWEEP_LEASE_SECONDS")))
        if holder is not None:
            raise LockHeld(
                f"lock {name!r} on {self.store_key} is held",
                how=f"lease {name!r} is held by {holder.owner} until {holder.expires_at}",
            )

    def renew_lease(self, name: str, token: str) -> None:
        Leases(self.using).renew(name, token, float(setting("SWEEP_LEASE_SECONDS")))

    def release_lease(self, name: str, token: str) -> bool:
        return Leases(self.using).release(name, token)

    # -- format generation ----------------------------------------------------------------
    def ensure_format(self) -> None:
        """Record the generation on a new store; refuse a store in another one."""
        key = self.using
        if key in _format_checked:
            return
        with _format_lock:
            if key in _format_checked:
                return
            try:
                with transaction.atomic(using=self.using):
                    formats = StoreFormat.objects.using(self.using)
                    recorded = list(formats.values_list("generation", flat=True))
                    if format_verdict(
                        recorded,
                        holds_checkpoints=not recorded
                        and CheckpointRow.objects.using(self.using).exists(),
                        where=f"the {self.provider} checkpoint store ({self.using})",
                    ):
                        formats.create(generation=FORMAT_GENERATION, recorded_at=utcnow())
            except DatabaseError as exc:
                # The advice fits the cause: a wrong role or port is not mended by migrate.
                entry = connections.settings[self.using]
                raise CheckpointConfigError(
                    one_line(
                        database_setting(self.using),
                        database_value(entry),
                        diagnose_database(exc, entry),
                    )
                ) from exc
            _format_checked.add(key)

    def recorded_format(self) -> str:
        found = list(StoreFormat.objects.using(self.using).values_list("generation", flat=True))
        holds = not found and CheckpointRow.objects.using(self.using).exists()
        where = f"the {self.provider} checkpoint store ({self.using})"
        format_verdict(found, holds_checkpoints=holds, where=where)
        return str(found[0]) if found else "none"

    def reset_store(self) -> int:
        db = self.using
        with transaction.atomic(using=db):
            threads = Thread.objects.using(db).count()
            for model in (
                PendingWrite,
                CheckpointRow,
                ChannelBlob,
                Thread,
                FinishedMark,
                StoreFormat,
            ):
                raw_delete(model.objects.using(db).all())
            StoreFormat.objects.using(db).create(generation=FORMAT_GENERATION, recorded_at=utcnow())
        _format_checked.add(self.using)
        return threads

    # -- owners ---------------------------------------------------------------------------
    def _owner_pk(self, key: str) -> int | None:
        """The user a put's ``user_id`` names (by pk, else username), None when none."""
        if not key:
            return None
        if key not in self._owner_cache:
            found = find_user(key, using=self.using, only_pk=True)
            self._owner_cache[key] = found.pk if found is not None else None
        return self._owner_cache[key]

    def set_owner(self, thread_id: str, user_pk: int | None) -> None:
        """Record ``user_pk`` as the owner of a thread the store holds."""
        Thread.objects.using(self.using).filter(thread_id=str(thread_id)).update(owner_id=user_pk)

    # -- store-wide views -----------------------------------------------------------------
    def threads(self, *, limit: int | None = None) -> list[str]:
        qs = (
            Thread.objects.using(self.using)
            .order_by("-last_write_at")
            .values_list("thread_id", flat=True)
        )
        return list(qs[:limit] if limit else qs)

    def mark_finished(self, thread_id: str, due_at: datetime, owner: str = "") -> FinishedEntry:
        now = utcnow()
        FinishedMark.objects.using(self.using).update_or_create(
            thread_id=str(thread_id),
            defaults={"marked_at": now, "due_at": due_at, "owner": owner or ""},
        )
        return FinishedEntry(str(thread_id), now, due_at, owner or "")

    def unmark_finished(self, thread_id: str) -> bool:
        deleted, _ = (
            FinishedMark.objects.using(self.using).filter(thread_id=str(thread_id)).delete()
        )
        return bool(deleted)

    def write_slots(self, thread_id: str) -> list[tuple]:
        return list(
            PendingWrite.objects.using(self.using)
            .filter(thread__thread_id=thread_id)
            .values_list("checkpoint_ns", "checkpoint_id", "task_id", "task_path", "idx", "channel")
        )

    def finished_mark(self, thread_id: str) -> FinishedEntry | None:
        mark = FinishedMark.objects.using(self.using).filter(thread_id=str(thread_id)).first()
        if mark is None:
            return None
        return FinishedEntry(mark.thread_id, mark.marked_at, mark.due_at, mark.owner)

    def finished_due(self, now: datetime, *, limit: int | None = None) -> list[FinishedEntry]:
        qs = FinishedMark.objects.using(self.using).filter(due_at__lte=now).order_by("due_at")
        if limit:
            qs = qs[:limit]
        return [FinishedEntry(m.thread_id, m.marked_at, m.due_at, m.owner) for m in qs]

    def set_thread_retention(self, thread_id: str, retention: ThreadRetention) -> None:
        now = utcnow()
        thread = Thread(
            thread_id=str(thread_id),
            created_at=now,
            last_write_at=now,
            waiting_minutes=retention.waiting_minutes,
            finished_minutes=retention.finished_minutes,
        )
        Thread.objects.using(self.using).bulk_create(
            [thread],
            update_conflicts=True,
            unique_fields=["thread_id"],
            update_fields=["waiting_minutes", "finished_minutes"],
        )

    def thread_retention(self, thread_id: str) -> ThreadRetention:
        found = (
            Thread.objects.using(self.using)
            .filter(thread_id=str(thread_id))
            .values_list("waiting_minutes", "finished_minutes")
            .first()
        )
        return ThreadRetention(*found) if found else ThreadRetention()

    def finished_marks(self, thread_ids: Iterable[str]) -> dict[str, FinishedEntry]:
        rows = FinishedMark.objects.using(self.using).filter(
            thread_id__in=[str(t) for t in thread_ids]
        )
        return {
            m.thread_id: FinishedEntry(m.thread_id, m.marked_at, m.due_at, m.owner) for m in rows
        }

    def last_writes(self, thread_ids: Iterable[str]) -> dict[str, datetime]:
        return dict(
            Thread.objects.using(self.using)
            .filter(thread_id__in=[str(t) for t in thread_ids])
            .values_list("thread_id", "last_write_at")
        )

    def thread_version(self, thread_id: str) -> int:
        found = (
            Thread.objects.using(self.using)
            .filter(thread_id=str(thread_id))
            .values_list("version", flat=True)
            .first()
        )
        return found or 0

    def bump_thread_version(self, thread_id: str, expected: int | None = None) -> int:
        rows = Thread.objects.using(self.using).filter(thread_id=str(thread_id))
        if expected is not None:
            rows = rows.filter(version=expected)
        if not rows.update(version=F("version") + 1):
            current = self.thread_version(thread_id)
            raise ThreadVersionConflict(
                f"thread {thread_id!r} is at version {current}, not {expected}: "
                "it changed since it was read"
            )
        return self.thread_version(thread_id)

    def idle_writes(
        self, now: datetime, waiting_minutes: int, *, limit: int | None = None
    ) -> dict[str, datetime]:
        threads = Thread.objects.using(self.using)
        found = dict(
            threads.filter(
                waiting_minutes__isnull=True,
                last_write_at__lt=now - timedelta(minutes=waiting_minutes),
            )
            .order_by("last_write_at")
            .values_list("thread_id", "last_write_at")[: limit or None]
        )
        # Declared horizons are few distinct values; one indexed query each.
        declared = (
            threads.filter(waiting_minutes__isnull=False)
            # order_by() first: Thread's default ordering would join last_write_at into
            # the DISTINCT and list each horizon once per thread.
            .order_by()
            .values_list("waiting_minutes", flat=True)
            .distinct()
        )
        for minutes in declared:
            if limit and len(found) >= limit:
                break
            found.update(
                threads.filter(
                    waiting_minutes=minutes, last_write_at__lt=now - timedelta(minutes=minutes)
                )
                .order_by("last_write_at")
                .values_list("thread_id", "last_write_at")[
                    : (limit - len(found)) if limit else None
                ]
            )
        return found

    def idle_among(
        self, thread_ids: Iterable[str], now: datetime, waiting_minutes: int
    ) -> list[str]:
        ids = [str(t) for t in thread_ids]
        rows = (
            Thread.objects.using(self.using)
            .filter(thread_id__in=ids)
            .values_list("thread_id", "last_write_at", "waiting_minutes")
        )
        idle = {
            thread_id
            for thread_id, last_write, minutes in rows
            if last_write
            < now - timedelta(minutes=ThreadRetention(minutes).waiting_in_force(waiting_minutes))
        }
        return [t for t in ids if t in idle]

    def interrupted(self, thread_ids: Iterable[str]) -> set[str]:
        # One query finds the few threads holding any interrupt write; only those are checked
        # for whether it sits on their latest checkpoint, so a batch costs ~1 query, not ~N.
        db = self.using
        ids = [str(t) for t in thread_ids]
        written: dict[str, set[str]] = {}
        for thread_id, checkpoint_id in (
            PendingWrite.objects.using(db)
            .filter(thread__thread_id__in=ids, checkpoint_ns="", channel=INTERRUPT)
            .values_list("thread__thread_id", "checkpoint_id")
            .distinct()
        ):
            written.setdefault(thread_id, set()).add(checkpoint_id)
        live = set()
        for thread_id, checkpoint_ids in written.items():
            latest = (
                CheckpointRow.objects.using(db)
                .filter(thread__thread_id=thread_id, checkpoint_ns="")
                .order_by("-checkpoint_id")
                .values_list("checkpoint_id", flat=True)
                .first()
            )
            if latest in checkpoint_ids:
                live.add(thread_id)
        return live
