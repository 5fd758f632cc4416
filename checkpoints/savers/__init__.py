"""Pick and build the checkpoint saver for a provider: the one place backends are chosen."""

from __future__ import annotations

from typing import Any

from checkpoints.conf import setting
from checkpoints.errors import CheckpointConfigError
from checkpoints.savers.base import StoreSaver

PROVIDERS = ("postgres", "sqlite", "redis", "memory")


def get_saver(provider: str | None = None, **options: Any) -> StoreSaver:
    """The deployment's saver, or one for ``provider``.

    Options: ``conn_string`` (another database or Redis), ``max_checkpoints``, ``serde``,
    ``using`` (a Django database alias) for the ORM providers, and ``check_format=False``
    (only for resetting a store the format check refuses).
    """
    provider = (provider or setting("PROVIDER") or "").strip().lower()
    if provider not in PROVIDERS:
        raise CheckpointConfigError(
            f"checkpoint provider {provider!r} is unknown; use one of {', '.join(PROVIDERS)}",
            field="provider",
        )
    conn_string = options.pop("conn_string", None)
    if conn_string is None and provider == (setting("PROVIDER") or "").strip().lower():
        conn_string = setting("CONN_STRING")
    if provider == "memory":
        from checkpoints.savers.memory import MemorySaver

        options.pop("check_format", None)
        return MemorySaver(**options)
    if provider == "redis":
        from checkpoints.savers.redis import RedisSaver

        return RedisSaver(conn_string=conn_string, **options)
    from django.db import connections

    from checkpoints.savers.orm import OrmSaver, alias_for_conn_string

    using = options.pop("using", None)
    if using is None:
        using = alias_for_conn_string(conn_string) if conn_string else "default"
    saver = OrmSaver(using=using, **options)
    if saver.provider != provider:
        raise CheckpointConfigError(
            f"provider {provider!r} was asked for, but database {using!r} is "
            f"{connections[using].vendor}; set LLM_PROVIDER_CHECKPOINT_CONN_STRING "
            f"(or DATABASE_URL) to a {provider} database",
            field="provider",
        )
    return saver


__all__ = ["get_saver", "StoreSaver", "PROVIDERS"]
