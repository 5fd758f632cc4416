"""Which Django permission staff need for each store action: the admin and the API ask here.

A thread's owner acts on it through the API without any (the API's owner rule); staff act
on anyone's thread only with the action's model permission, as they do in the admin. The
admin offers no thread delete, bulk update or declared retention: those rows are the ones
Django's admin would ask for the model they change.
"""

from __future__ import annotations

from checkpoints.errors import MissingPermission

# action: the permissions staff may hold for it, any one of them (as "app.codename").
REQUIRED: dict[str, tuple[str, ...]] = {
    "delete": ("checkpoints.delete_thread",),
    # Both write a new head onto the thread: a change to its checkpoints.
    "rollback": ("checkpoints.change_checkpoint",),
    "bulk_update": ("checkpoints.change_checkpoint",),
    "fork": ("checkpoints.add_checkpoint",),
    "finish": ("checkpoints.change_thread",),
    # The marks list lets delete_finishedmark holders unmark too.
    "unfinish": ("checkpoints.change_thread", "checkpoints.delete_finishedmark"),
    "retention": ("checkpoints.change_thread",),
    # A thread's metadata in the LangGraph API (threads.update): a change to the thread.
    "metadata": ("checkpoints.change_thread",),
    "sweep": ("retention.run_sweep",),
    # Keeping a thread from the sweep is an operator's call, never its owner's alone.
    "hold": ("retention.add_hold",),
}


def staff_may(user, action: str) -> bool:
    """Whether ``user`` holds a staff power for ``action`` (superusers hold them all)."""
    return bool(user.is_active and user.is_staff) and any(
        user.has_perm(perm) for perm in REQUIRED[action]
    )


def require(user, action: str, *, owner_pk=None) -> None:
    """Refuse ``action`` unless ``user`` owns the thread or holds the staff power for it.

    ``owner_pk``: the pk of the thread's owner (None when unknown, or for no thread).
    """
    if owner_pk is not None and owner_pk == user.pk:
        return
    if staff_may(user, action):
        return
    needed = " or ".join(repr(perm) for perm in REQUIRED[action])
    raise MissingPermission(f"the {action} action needs a staff user with the {needed} permission")
