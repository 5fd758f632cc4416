"""Pick and build the checkpoint saver for a provider: the one place backends are chosen.

Each provider names its saver class by dotted path; ``CHECKPOINTS["SAVERS"]`` adds
providers or replaces a class, so a deployment can run its own saver (a `StoreSaver`
subclass with a ``build`` classmethod). A path that does not import is a configuration
error naming it (system check ``checkpoints.E007``, and again when a saver is built).
"""

from __future__ import annotations

from typing import Any

from django.db import connections
from django.utils.module_loading import import_string

from checkpoints.conf import setting
from checkpoints.errors import CheckpointConfigError

# The ORM saver of each Django database vendor (`dialect_saver`).
DIALECTS = {
    "postgresql": "checkpoints.store.postgres.saver.PostgresStore",
    "sqlite": "checkpoints.store.sqlite.saver.SqliteStore",
}
SAVER_CLASSES = {
    "postgres": DIALECTS["postgresql"],
    "sqlite": DIALECTS["sqlite"],
    "redis": "checkpoints.store.redis.saver.RedisSaver",
    "memory": "checkpoints.store.memory.MemorySaver",
}
# The shipped providers; `providers()` adds the deployment's own.
PROVIDERS = tuple(SAVER_CLASSES)


def saver_paths() -> dict[str, str]:
    """Provider -> dotted path of its saver class, the deployment's entries included."""
    return {**SAVER_CLASSES, **(setting("SAVERS") or {})}


def providers() -> tuple[str, ...]:
    return tuple(saver_paths())


def saver_class(provider: str) -> type:
    """The saver class for ``provider``; CheckpointConfigError naming a path that fails."""
    path = saver_paths()[provider]
    try:
        return import_string(path)
    except ImportError as exc:
        raise CheckpointConfigError(
            f"CHECKPOINTS['SAVERS'][{provider!r}] is {path!r}, which cannot be imported: {exc}",
            field="provider",
        ) from exc


def dialect_saver(using: str) -> type:
    """The ORM saver class of database ``using``'s dialect: the one place it is chosen.

    Only that dialect's package is imported: a SQLite store never loads psycopg.
    """
    if using not in connections.settings:
        raise CheckpointConfigError(f"database alias {using!r} is not configured")
    vendor = connections[using].vendor
    if vendor not in DIALECTS:
        raise CheckpointConfigError(
            f"database {using!r} is {vendor}; the ORM saver runs on PostgreSQL or SQLite"
        )
    return import_string(DIALECTS[vendor])


def orm_saver(using: str = "default", **options: Any):
    """The ORM saver on database ``using``, of whichever dialect it speaks."""
    return dialect_saver(using)(using=using, **options)


def path_errors() -> list[tuple[str, str, str]]:
    """(provider, path, reason) for every path the deployment names that does not import.

    The shipped paths are not imported here, so a boot does not load every backend.
    """
    found = []
    for provider, path in (setting("SAVERS") or {}).items():
        try:
            import_string(path)
        except ImportError as exc:
            found.append((provider, path, str(exc)))
    return found


def configured_provider() -> str:
    return (setting("PROVIDER") or "").strip().lower()


def get_saver(provider: str | None = None, **options: Any):
    """The deployment's saver, or one for ``provider``.

    Options: ``conn_string`` (another database or Redis), ``max_checkpoints``, ``serde``,
    ``using`` (a Django database alias) for the ORM providers, and ``check_format=False``
    (only for resetting a store the format check refuses).
    """
    provider = (provider or configured_provider()).strip().lower()
    known = providers()
    if provider not in known:
        raise CheckpointConfigError(
            f"checkpoint provider {provider!r} is unknown; use one of {', '.join(known)}",
            field="provider",
        )
    conn_string = options.pop("conn_string", None)
    if conn_string is None and provider == configured_provider():
        conn_string = setting("CONN_STRING")
    return saver_class(provider).build(provider=provider, conn_string=conn_string, **options)
