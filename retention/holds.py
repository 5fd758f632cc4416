"""Holds: an operator keeps a thread for investigation, and the sweep spares it meanwhile.

A hold names its thread on one store (by provider, as parks do), who placed it, why, and
optionally until when. It lives in the default database beside parks, so it works on every
provider the sweep covers (ORM, Redis, memory). The sweep asks holds before every delete
like a live-thread filter (spared rows read "held by <user>: <reason> until …"), and the
status rule shows a held thread as held. Placing and releasing are audited.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING

from django.db import transaction
from django.db.models import Q, QuerySet

from checkpoints import audit
from checkpoints.codec.render import moment_text as when
from checkpoints.conf import has_database
from checkpoints.store.contract import StoreSaver
from checkpoints.store.planning import utcnow
from checkpoints.store.registry import get_saver
from retention.errors import HoldRefused

if TYPE_CHECKING:
    from checkpoints.status import Claim
    from retention.models import Hold

# The models are imported in the functions that read them: a plain script imports the
# sweep (and so this module) before `from_conn_string` sets Django up, which models need.

# The owner a held thread is spared under in a sweep's result.
HOLD_OWNER = "hold"
REASON_MAX = 2000


def live_holds(*, provider: str, now: datetime) -> QuerySet:
    """The holds that keep threads of ``provider``'s store at ``now``: not released, and
    open-ended or ending later."""
    from retention.models import Hold  # see the note at the top

    return Hold.objects.filter(
        Q(until__isnull=True) | Q(until__gt=now), provider=provider, released_at__isnull=True
    )


def describe(hold: Hold) -> str:
    """A hold in words: "held by ops: refund dispute until 2026-12-09 10:00:00 UTC"."""
    until = f" until {when(hold.until)}" if hold.until else " until released"
    return f"held by {hold.created_by}: {hold.reason}{until}"


def holds_on(
    *, provider: str, thread_ids: Iterable[str], now: datetime | None = None
) -> dict[str, Hold]:
    """thread id -> its live hold, for those of ``thread_ids`` that have one."""
    ids = [str(t) for t in thread_ids]
    if not ids or not has_database():
        return {}
    rows = live_holds(provider=provider, now=now or utcnow()).filter(thread_id__in=ids)
    return {hold.thread_id: hold for hold in rows}


def held(
    thread_ids: Iterable[str], *, saver: StoreSaver | None = None, now: datetime | None = None
) -> dict[str, str]:
    """The sweep's hold check, shaped as a live-thread filter: held id -> why, in words."""
    if saver is None:
        saver = get_saver()
    found = holds_on(provider=saver.provider, thread_ids=thread_ids, now=now)
    return {thread_id: describe(hold) for thread_id, hold in found.items()}


def hold_thread(
    saver: StoreSaver,
    thread_id: str,
    *,
    reason: str,
    by: str,
    until: datetime | None = None,
    now: datetime | None = None,
) -> Hold:
    """Keep the thread from the sweep; a thread already held gets this hold instead.

    Raises HoldRefused for an empty reason, a naive end time, or one not after ``now``.
    """
    from retention.models import Hold  # see the note at the top

    thread_id = str(thread_id)
    now = now or utcnow()
    reason = (reason or "").strip() if isinstance(reason, str) else reason
    if not isinstance(reason, str) or not reason:
        raise HoldRefused(
            f"a hold on thread {thread_id!r} needs a reason (why it is kept), got {reason!r}",
            field="reason",
        )
    if len(reason) > REASON_MAX:
        raise HoldRefused(
            f"the hold reason for thread {thread_id!r} is {len(reason)} characters; at most "
            f"{REASON_MAX}",
            field="reason",
        )
    if until is not None:
        if not isinstance(until, datetime) or until.tzinfo is None:
            raise HoldRefused(
                f"the hold end time for thread {thread_id!r} must be a timezone-aware "
                f"datetime, got {until!r}",
                field="until",
            )
        if until <= now:
            raise HoldRefused(
                f"the hold end time {until.isoformat()} for thread {thread_id!r} is not after "
                f"now ({now.isoformat()})",
                field="until",
            )
    with transaction.atomic():
        replaced = Hold.objects.filter(
            provider=saver.provider, thread_id=thread_id, released_at__isnull=True
        ).update(released_at=now, released_by=by[:150])
        hold = Hold.objects.create(
            thread_id=thread_id,
            provider=saver.provider,
            reason=reason,
            until=until,
            created_at=now,
            created_by=by[:150],
        )
        audit.record(
            "hold",
            thread_id=thread_id,
            provider=saver.provider,
            detail={
                "reason": reason,
                "until": until.isoformat() if until else None,
                "by": by[:150],
                **({"replaced": True} if replaced else {}),
            },
        )
    return hold


def release_hold(
    saver: StoreSaver, thread_id: str, *, by: str, now: datetime | None = None
) -> bool:
    """Let the sweep judge the thread again; True when a hold was released."""
    from retention.models import Hold  # see the note at the top

    now = now or utcnow()
    with transaction.atomic():
        released = Hold.objects.filter(
            provider=saver.provider, thread_id=str(thread_id), released_at__isnull=True
        ).update(released_at=now, released_by=by[:150])
        if released:
            audit.record(
                "release_hold",
                thread_id=str(thread_id),
                provider=saver.provider,
                detail={"by": by[:150]},
            )
    return bool(released)


class HoldClaims:
    """Holds as the status rule's ``held`` claims (registered by the app's ready())."""

    kind = "held"

    def claims(self, *, provider: str, thread_ids: list[str], now: datetime) -> dict[str, Claim]:
        from checkpoints.status import Claim  # reads the models: see the note at the top

        found = holds_on(provider=provider, thread_ids=thread_ids, now=now)
        return {t: Claim("held", describe(h), h.until) for t, h in found.items()}

    def claimed(self, *, provider: str, now: datetime) -> QuerySet:
        return live_holds(provider=provider, now=now)
