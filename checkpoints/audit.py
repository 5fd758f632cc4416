"""The audit trail: every change an operator or a service makes to a thread, and each sweep.

Entrances say who is acting (``acting(...)`` around a request, a command or a task); the
services that change state call ``record(...)``, so admin, API, command and task leave the
same trail. Admin actions are also written to Django's admin log (``LogEntry``) so the
admin's "Recent actions" shows them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async

logger = logging.getLogger(__name__)

ORIGINS = ("admin", "api", "command", "task", "python")
# Every action the services record; the admin's action filter offers these.
ACTIONS = (
    "rollback",
    "fork",
    "bulk_update",
    "delete_thread",
    # delete_for_runs through the store service: checkpoints of runs, across threads.
    "delete_runs",
    "prune",
    "copy_thread",
    "mark_finished",
    "unmark_finished",
    "declare_retention",
    "hold",
    "release_hold",
    "sweep",
)


@dataclass(frozen=True)
class Actor:
    origin: str = "python"
    user: Any = None
    name: str = ""
    remote_addr: str | None = None
    # Resolves the user late: DRF authenticates only when the view first asks.
    resolve_user: Callable[[], Any] | None = None

    def who(self) -> tuple[Any, str]:
        user = self.user
        if user is None and self.resolve_user is not None:
            user = self.resolve_user()
        if user is not None and not getattr(user, "is_authenticated", False):
            user = None
        name = self.name or (user.get_username() if user is not None else "")
        return user, name


# Actor is frozen, so the shared default cannot be changed through the variable.
_actor: ContextVar[Actor] = ContextVar("checkpoints_audit_actor", default=Actor())  # noqa: B039


def client_address(request) -> str | None:
    address = (request.META.get("REMOTE_ADDR") or "").strip()
    return address or None


@contextmanager
def acting(
    *,
    origin: str,
    user: Any = None,
    name: str = "",
    remote_addr: str | None = None,
    resolve_user: Callable[[], Any] | None = None,
) -> Iterator[Actor]:
    """Attribute every ``record`` inside the block to this actor."""
    if origin not in ORIGINS:
        raise ValueError(f"audit origin {origin!r} is not one of {', '.join(ORIGINS)}")
    actor = Actor(origin, user, name, remote_addr, resolve_user)
    token = _actor.set(actor)
    try:
        yield actor
    finally:
        _actor.reset(token)


def from_request(request, origin: str):
    """``acting`` for a Django or DRF request: the user is read when the first event is."""
    return acting(
        origin=origin,
        remote_addr=client_address(request),
        resolve_user=lambda: getattr(request, "user", None),
    )


class AuditedActionsMixin:
    """ModelAdmin mixin: changes made by admin actions are recorded as the admin user's."""

    def response_action(self, request, queryset):
        with from_request(request, "admin"):
            return super().response_action(request, queryset)


def bind(actor: Actor):
    """Set the actor until ``unbind(token)``: for entrances with separate start and end hooks."""
    return _actor.set(actor)


def unbind(token) -> None:
    _actor.reset(token)


def record(
    action: str,
    *,
    thread_id: str = "",
    provider: str = "",
    detail: dict[str, Any] | None = None,
):
    """Write one audit event for the current actor and return it."""
    from checkpoints.conf import has_database
    from checkpoints.models import AuditEvent

    if action not in ACTIONS:
        raise ValueError(f"audit action {action!r} is not one of {', '.join(ACTIONS)}")
    if not has_database():
        logger.info("audit: %s on %r not recorded: no database is configured", action, thread_id)
        return None
    actor = _actor.get()
    user, name = actor.who()
    event = AuditEvent.objects.create(
        action=action,
        origin=actor.origin,
        user=user,
        actor=name[:150],
        remote_addr=actor.remote_addr,
        provider=provider,
        thread_id=str(thread_id),
        detail=detail or {},
    )
    if actor.origin == "admin" and user is not None:
        _admin_log(user, event)
    return event


async def arecord(action: str, **kwargs: Any):
    return await sync_to_async(record, thread_sensitive=True)(action, **kwargs)


def _admin_log(user, event) -> None:
    from django.contrib.admin.models import CHANGE, LogEntry
    from django.contrib.contenttypes.models import ContentType

    from checkpoints.models import Thread

    # The admin links a log line to the Thread row's page, which is keyed by pk.
    row = Thread.objects.filter(thread_id=event.thread_id).values_list("pk", flat=True).first()
    LogEntry.objects.create(
        user_id=user.pk,
        content_type_id=ContentType.objects.get_for_model(Thread).pk,
        object_id=str(row) if row is not None else None,
        object_repr=(f"{event.action} {event.thread_id}" if event.thread_id else event.action)[
            :200
        ],
        action_flag=CHANGE,
        change_message=_message(event),
    )


def _message(event) -> str:
    parts = [f"{key}={value}" for key, value in sorted(event.detail.items())]
    return f"{event.action}: " + ", ".join(parts) if parts else event.action
