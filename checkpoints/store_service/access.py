"""Who may do what through `/store/v1/`: the owner rule of the API, for a saver's calls.

* A token acts for its user; one holding ``checkpoints.store_name_owner`` acts for the user
  ``configurable.user_id`` names (by pk, else username: the store's one rule), and without
  that permission the key never decides an owner.
* A thread is read and written by its owner; another owner's thread (or one without an
  owner) is a 404, on read and on write, never a takeover. Staff read any thread (as in
  the API); ``checkpoints.store_worker_write`` reads and writes any (a worker serving many
  users), and neither deletes nor sweeps unless the staff permission for it is held too.
* A new thread is claimed for its owner by the first write that reaches it, put or
  put_writes, in one statement (the thread's unique id decides between two first
  writers); the write then keeps that owner (the savers' thread upsert keeps an owner).
* Destructive calls ask `checkpoints.permissions` (the owner, or staff with the action's
  permission), as the API does.

Stores that record no owners (Redis, memory): only staff read, only workers write, as the
API shows such a store's threads to staff only.
"""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, connections, transaction

from checkpoints import permissions
from checkpoints.errors import InvalidCheckpointInput, MissingPermission
from checkpoints.models import Thread
from checkpoints.selectors import not_found, owners_in_tables
from checkpoints.store.orm.ledger import find_user
from checkpoints.store.planning import check_thread_id, utcnow

WORKER_WRITE = "checkpoints.store_worker_write"
_OWNER_SQL = (
    f'SELECT "{Thread._meta.get_field("owner").column}" FROM "{Thread._meta.db_table}" '
    f'WHERE "{Thread._meta.get_field("thread_id").column}" = %s'
)
NAME_OWNER = "checkpoints.store_name_owner"


class Caller:
    """The token's user and what it may do, asked once per request."""

    def __init__(self, user: Any, saver: Any) -> None:
        self.user = user
        self.saver = saver
        self.writes_any = user.has_perm(WORKER_WRITE)
        self.reads_any = self.writes_any or bool(user.is_active and user.is_staff)
        self.names_owner = user.has_perm(NAME_OWNER)
        self.owned = owners_in_tables(saver)

    # -- the owner a call acts for -------------------------------------------------------------
    def owner(self, config: dict[str, Any] | None) -> Any:
        """The user this call acts for (see the module's docstring)."""
        named = ((config or {}).get("configurable") or {}).get("user_id")
        if named in (None, "") or not self.names_owner:
            return self.user
        if not isinstance(named, (str, int)) or isinstance(named, bool):
            raise InvalidCheckpointInput(
                "configurable.user_id must be a user's id or name", field="user_id"
            )
        found = find_user(str(named), using=self.saver.db_alias or "default")
        if found is None:
            raise InvalidCheckpointInput(
                f"configurable.user_id {named!r} names no user of this service", field="user_id"
            )
        return found

    def scrub(self, config: dict[str, Any] | None) -> dict[str, Any] | None:
        """``config`` without ``user_id`` unless the caller may name owners: the key then
        never reaches the store (neither the owner nor the metadata it is merged into)."""
        if config is None or self.names_owner:
            return config
        configurable = config.get("configurable")
        if configurable and "user_id" in configurable:
            config = {**config, "configurable": dict(configurable)}
            del config["configurable"]["user_id"]
        return config

    def owner_pk(self, user: Any) -> int | None:
        """``user``'s pk in the store's database: users live per database, and a user of
        another one is the store's user of the same name (none when it has none), as
        `checkpoints.threads.record_owner` has it."""
        alias = self.saver.db_alias
        if user._state.db in (None, alias):
            return user.pk
        model = type(user)
        found = model._default_manager.db_manager(alias).filter(
            **{model.USERNAME_FIELD: user.get_username()}
        )
        return found.values_list("pk", flat=True).first()

    # -- threads -----------------------------------------------------------------------------
    def _owner_pk(self, thread_id: str) -> tuple[bool, int | None]:
        """(whether the store has the thread's record, its owner's pk)."""
        # One statement on every write and read: written out, not built by the ORM, whose
        # query compiling cost more of the service's CPU than the store's own write.
        # thread_id is unique, so no ordering is needed (the model's would add one).
        with connections[self.saver.db_alias or "default"].cursor() as cursor:
            cursor.execute(_OWNER_SQL, [thread_id])
            found = cursor.fetchone()
        return (True, found[0]) if found else (False, None)

    def may_read(self, thread_id: str, config: dict[str, Any] | None = None) -> None:
        """Refuse (404) a read of a thread the caller may not see; a thread the store has
        no record of reads as empty."""
        thread_id = check_thread_id(thread_id)
        if self.reads_any:
            return
        if not self.owned:
            raise not_found(thread_id)
        known, owner_pk = self._owner_pk(thread_id)
        if known and (owner_pk is None or owner_pk != self.owner_pk(self.owner(config))):
            raise not_found(thread_id)

    def claim(self, thread_id: str, config: dict[str, Any] | None) -> None:
        """Make sure the caller may write ``thread_id``, claiming it for the owner the call
        acts for when no one has; 404 for another owner's thread."""
        thread_id = check_thread_id(thread_id)
        if not self.owned:
            if not self.writes_any:
                raise not_found(thread_id)
            return
        owner = self.owner_pk(self.owner(config))
        known, owner_pk = self._owner_pk(thread_id)
        if not known:
            now = utcnow()
            try:
                # Its own savepoint: a second first writer's duplicate leaves the caller's
                # transaction (a test's, a host's ATOMIC_REQUESTS) usable.
                with transaction.atomic(using=self.saver.db_alias):
                    Thread.objects.using(self.saver.db_alias).create(
                        thread_id=thread_id, owner_id=owner, created_at=now, last_write_at=now
                    )
                return
            except IntegrityError:
                known, owner_pk = self._owner_pk(thread_id)
        if (owner_pk is not None and owner_pk == owner) or self.writes_any:
            return
        raise not_found(thread_id)

    def may_destroy(self, thread_id: str, action: str = "delete") -> bool:
        """Whether the caller may ``action`` the thread: False for one the store holds no
        record of (nothing to do); 404 when it may not see it, 403 when it sees it but
        lacks the permission."""
        thread_id = check_thread_id(thread_id)
        if not self.owned:
            if not self.reads_any:
                raise not_found(thread_id)
            permissions.require(self.user, action)
            return True
        known, owner_pk = self._owner_pk(thread_id)
        if not known:
            return False
        mine = owner_pk is not None and owner_pk == self.owner_pk(self.user)
        if not mine and not self.reads_any:
            raise not_found(thread_id)
        # permissions.require compares with the token user's own pk.
        permissions.require(self.user, action, owner_pk=self.user.pk if mine else owner_pk)
        return True

    def require_staff(self, action: str) -> None:
        if not permissions.staff_may(self.user, action):
            needed = " or ".join(repr(p) for p in permissions.REQUIRED[action])
            raise MissingPermission(
                f"{action} across threads needs a staff user with the {needed} permission"
            )
