"""What an import asks of retention: holds travel with their threads (an export names a
thread's live hold, an import places it again: `checkpoints.transfer.extras`), and parks
are asked a batch of thread ids at a time. Both registered by the app's ready()."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from checkpoints.conf import has_database
from checkpoints.store.planning import utcnow
from retention.holds import REASON_MAX, hold_thread, holds_on
from retention.models import Park


class HoldsExtra:
    """A thread's live hold as ``{"reason", "until", "by"}`` (``until``: ISO or None)."""

    name = "holds"

    def export(self, saver, thread_id: str) -> dict | None:
        hold = holds_on(provider=saver.provider, thread_ids=[thread_id]).get(thread_id)
        if hold is None:
            return None
        return {
            "reason": hold.reason,
            "until": hold.until.isoformat() if hold.until else None,
            "by": hold.created_by,
        }

    def check(self, value: Any) -> str | None:
        if type(value) is not dict or set(value) != {"reason", "until", "by"}:
            return "a hold is an object of reason, until and by"
        reason, by, until = value["reason"], value["by"], value["until"]
        if not isinstance(reason, str) or not reason.strip() or len(reason) > REASON_MAX:
            return f"a hold's reason is text of 1 to {REASON_MAX} characters"
        if not isinstance(by, str):
            return "a hold's by is not text"
        if until is not None and _moment(until) is None:
            return f"a hold's until {until!r} is not an ISO time with a zone"
        return None

    def restore(self, saver, thread_id: str, value: dict) -> None:
        until = _moment(value["until"]) if value["until"] is not None else None
        if until is not None and until <= utcnow():
            return  # it lapsed between the export and the import: it keeps nothing now
        hold_thread(saver, thread_id, reason=value["reason"], by=value["by"], until=until)


def _moment(text: Any) -> datetime | None:
    try:
        when = datetime.fromisoformat(text) if isinstance(text, str) else None
    except ValueError:
        return None
    return when if when is not None and when.tzinfo is not None else None


def parks_among(saver, thread_ids: list[str]) -> dict[str, str]:
    """`runs.park_presence` for many ids in one query: "a park" for each one a park on
    this store names."""
    if not thread_ids or not saver.can_park or not has_database():
        return {}
    named = Park.objects.filter(thread_id__in=thread_ids, provider=saver.provider)
    return dict.fromkeys(named.values_list("thread_id", flat=True), "a park")
