"""Thread-level changes that every entrance shares."""

from __future__ import annotations

from checkpoints import audit


def delete_thread(*, saver, thread_id: str) -> None:
    """Delete the thread and everything it holds, and record who did."""
    saver.delete_thread(thread_id)
    audit.record("delete_thread", thread_id=thread_id, provider=saver.provider)
