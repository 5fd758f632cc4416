"""Thread-level changes that every entrance shares."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from checkpoints import audit
from checkpoints.errors import ThreadExists

# Where else a thread id may already be taken, beyond the store itself: name -> func(saver,
# thread_id) -> how, or None. Apps register theirs in AppConfig.ready() (retention: parks).
PresenceCheck = Callable[[Any, str], str | None]
_presence_checks: dict[str, PresenceCheck] = {}


# The same checks asked of many ids in one go, where an app gives one: name -> func(saver,
# thread_ids) -> {thread id: how} for those taken.
PresenceAmong = Callable[[Any, list[str]], dict[str, str]]
_presence_among: dict[str, PresenceAmong] = {}


def register_presence_check(
    name: str, check: PresenceCheck, among: PresenceAmong | None = None
) -> None:
    """Have `thread_presence` also ask ``check(saver, thread_id)``; ``name`` replaces any
    check registered before under it. ``among``: the check for many ids at once (an
    import's batches ask it once a batch)."""
    _presence_checks[name] = check
    if among is not None:
        _presence_among[name] = among
    else:
        _presence_among.pop(name, None)


def delete_thread(*, saver, thread_id: str) -> None:
    """Delete the thread and everything it holds, and record who did."""
    saver.delete_thread(thread_id)
    audit.record("delete_thread", thread_id=thread_id, provider=saver.provider)


def thread_presence(*, saver, thread_id: str) -> str | None:
    """How ``thread_id`` already exists, in the store or anywhere an app registered a check
    for (`register_presence_check`); None if nowhere."""
    found = saver.thread_presence(thread_id)
    if found is not None:
        return found
    return registered_presence(saver=saver, thread_id=thread_id)


def registered_presence(*, saver, thread_id: str) -> str | None:
    """How ``thread_id`` is taken outside the store (the registered checks), or None."""
    for check in list(_presence_checks.values()):
        found = check(saver, str(thread_id))
        if found is not None:
            return found
    return None


def registered_presence_among(*, saver, thread_ids: list[str]) -> dict[str, str]:
    """thread id -> how it is taken outside the store, for those of ``thread_ids`` the
    registered checks find: for a caller that asked the store itself in bulk (an import's
    batched presence check). A check given without ``among`` is asked id by id."""
    found: dict[str, str] = {}
    for name, check in list(_presence_checks.items()):
        rest = [t for t in thread_ids if t not in found]
        among = _presence_among.get(name)
        if among is not None:
            found.update({t: how for t, how in among(saver, rest).items() if t not in found})
            continue
        for thread_id in rest:
            how = check(saver, thread_id)
            if how is not None:
                found[thread_id] = how
    return found


def refuse_existing(*, saver, thread_id: str, doing: str) -> None:
    """Raise ``ThreadExists`` when ``thread_id`` exists in any form (see thread_presence)."""
    found = thread_presence(saver=saver, thread_id=thread_id)
    if found is not None:
        raise ThreadExists(
            f"cannot {doing} onto thread {thread_id!r}: it already exists ({found}); "
            "choose a new thread id",
            field="new_thread_id",
        )


def record_owner(*, saver, thread_id: str, user) -> None:
    """Make ``user`` the owner of a thread just made for them, where the store records owners.

    Users live per database: a user of another database than the store's is the store's
    user of the same name (none when it has none), never whoever has the same number there.
    """
    pk = getattr(user, "pk", None)
    if pk is None or not getattr(saver, "records_owners", False):
        return
    alias = getattr(saver, "db_alias", None)
    if alias is not None and user._state.db not in (None, alias):
        model = type(user)
        name = user.get_username()
        found = model._default_manager.db_manager(alias).filter(**{model.USERNAME_FIELD: name})
        pk = found.values_list("pk", flat=True).first()
    saver.set_owner(thread_id, pk)
