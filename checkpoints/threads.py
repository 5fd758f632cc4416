"""Thread-level changes that every entrance shares."""

from __future__ import annotations

from checkpoints import audit
from checkpoints.errors import ThreadExists


def delete_thread(*, saver, thread_id: str) -> None:
    """Delete the thread and everything it holds, and record who did."""
    saver.delete_thread(thread_id)
    audit.record("delete_thread", thread_id=thread_id, provider=saver.provider)


def thread_presence(*, saver, thread_id: str) -> str | None:
    """How ``thread_id`` already exists, in the store or as a retention park; None if not."""
    found = saver.thread_presence(thread_id)
    if found is not None:
        return found
    from django.apps import apps

    if apps.is_installed("retention"):
        park = apps.get_model("retention", "Park")
        if park.objects.filter(thread_id=str(thread_id), provider=saver.provider).exists():
            return "a park"
    return None


def refuse_existing(*, saver, thread_id: str, doing: str) -> None:
    """Raise ``ThreadExists`` when ``thread_id`` exists in any form (see thread_presence)."""
    found = thread_presence(saver=saver, thread_id=thread_id)
    if found is not None:
        raise ThreadExists(
            f"cannot {doing} onto thread {thread_id!r}: it already exists ({found}); "
            "choose a new thread id",
            field="new_thread_id",
        )
