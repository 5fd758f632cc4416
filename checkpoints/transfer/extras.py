"""What a thread carries beyond its checkpoints, moved with it by export and import.

A thread's record in an export holds ``extras``: one entry per registered `ThreadExtra`,
under its ``name``. The store app registers the thread metadata the threads API searches
(``metadata``); the retention app registers its holds (``holds``, from its AppConfig's
ready()). Each extra reads its entry for a thread of the deployment's own store
(``export``), says what is wrong with an entry read from a file (``check``, before
anything of the thread is written) and writes it back (``restore``, inside the thread's
unit of work where the target's tables allow it, so a thread lands with its extras).

``--thread-metadata team,tier`` lifts checkpoint metadata keys into the ``metadata``
extra (`lift_metadata`): the newest root checkpoint holding a key gives its value; a key
the thread's metadata already holds keeps its own.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from checkpoints.errors import InvalidCheckpointInput
from checkpoints.transfer.records import ThreadRecord

METADATA = "metadata"
# The app whose table keeps thread metadata: the service installs it, a plain script's
# standalone store (`from_conn_string`) does not.
THREADS_API_APP = "checkpoints.langgraph_api"


def _threads_api_installed() -> bool:
    from django.apps import apps  # the registry is set up after this module is imported

    return apps.is_installed(THREADS_API_APP)


def refuse_lifting_without_threads_api(keys: Iterable[str]) -> None:
    """``thread_metadata`` needs the table the threads API searches: refused up front where
    it is missing, before anything is read."""
    if list(keys) and not _threads_api_installed():
        raise InvalidCheckpointInput(
            f"thread_metadata needs the threads API app ({THREADS_API_APP!r}) and its table, "
            "which this store does not have (a plain script's store); run the import in the "
            "service (manage.py import_checkpoints --thread-metadata ...)",
            field="thread_metadata",
        )


class ThreadExtra(Protocol):
    name: str

    def export(self, saver, thread_id: str) -> Any | None:
        """The entry of ``thread_id`` in the deployment's store ``saver``; None: nothing."""

    def check(self, value: Any) -> str | None:
        """Why ``value``, read from a file, cannot be restored; None when it can."""

    def restore(self, saver, thread_id: str, value: Any) -> None:
        """Write ``value`` for ``thread_id`` of ``saver``'s store (idempotent: a resumed
        import writes it again)."""


_extras: dict[str, ThreadExtra] = {}


def register_thread_extra(extra: ThreadExtra) -> None:
    """Carry ``extra`` with every exported and imported thread; a second registration
    under the same name replaces the first."""
    _extras[extra.name] = extra


def thread_extras() -> list[ThreadExtra]:
    return list(_extras.values())


def read_extras(saver, thread_id: str) -> dict[str, Any]:
    """The extras of a thread of the deployment's own store, by name (none left empty)."""
    found = {}
    for extra in thread_extras():
        value = extra.export(saver, thread_id)
        if value is not None:
            found[extra.name] = value
    return found


def check_extras(extras: Any) -> str | None:
    """Why a thread's extras cannot be restored here; None when every one can."""
    if type(extras) is not dict:
        return f"its extras are a {type(extras).__name__}, not an object"
    for name, value in extras.items():
        extra = _extras.get(name)
        if extra is None:
            known = ", ".join(sorted(_extras)) or "none"
            return f"its extras name {name!r}, which this deployment does not keep ({known})"
        why = extra.check(value)
        if why is not None:
            return f"its {name}: {why}"
    return None


def restore_extras(saver, thread_id: str, extras: dict[str, Any]) -> None:
    for name, value in extras.items():
        _extras[name].restore(saver, thread_id, value)


def lift_metadata(thread: ThreadRecord, keys: Iterable[str]) -> None:
    """Copy the named checkpoint metadata keys into the thread's metadata (see above)."""
    keys = list(keys)
    if not keys:
        return
    lifted: dict[str, Any] = {}
    roots = [cp for cp in thread.checkpoints if cp.ns == ""] or thread.checkpoints
    for cp in sorted(roots, key=lambda c: c.checkpoint_id, reverse=True):
        for key in keys:
            if key not in lifted and type(cp.metadata) is dict and key in cp.metadata:
                lifted[key] = cp.metadata[key]
        if len(lifted) == len(keys):
            break
    if not lifted:
        return
    current = thread.extras.get(METADATA)
    merged = {**lifted, **current} if type(current) is dict else lifted
    thread.extras = {**thread.extras, METADATA: merged}


class ThreadMetadataExtra:
    """The thread metadata the threads API keeps and searches (`ThreadMetadata`)."""

    name = METADATA

    def export(self, saver, thread_id: str) -> dict | None:
        if not _threads_api_installed():
            return None  # no table, so no thread metadata to carry
        # The model reads Django's app registry, which a plain script sets up after
        # importing this module (`from_conn_string`).
        from checkpoints.langgraph_api.models import ThreadMetadata

        row = ThreadMetadata.objects.filter(provider=saver.provider, thread_id=thread_id).first()
        return dict(row.metadata) if row is not None and row.metadata else None

    def check(self, value: Any) -> str | None:
        if not _threads_api_installed():
            return (
                f"the thread carries thread metadata, which this store cannot keep (no "
                f"{THREADS_API_APP!r} app: a plain script's store); import it in the service "
                "(manage.py import_checkpoints)"
            )
        # The API's rule for a client's metadata; it reads the models (see `export`).
        from checkpoints.api.base import client_metadata

        try:
            client_metadata(value, field="thread metadata")
        except InvalidCheckpointInput as exc:
            return exc.message
        return None

    def restore(self, saver, thread_id: str, value: dict) -> None:
        from checkpoints.langgraph_api.models import ThreadMetadata  # see `export`

        ThreadMetadata.objects.update_or_create(
            provider=saver.provider, thread_id=thread_id, defaults={"metadata": value}
        )


register_thread_extra(ThreadMetadataExtra())
