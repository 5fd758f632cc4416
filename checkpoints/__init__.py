"""Durable LangGraph checkpoints on Django.

The entry points: ``from checkpoints import from_conn_string`` (and ``afrom_conn_string``)
open a saver from a URL; ``get_saver()`` gives the configured store inside a Django project.
They are loaded on first use, so listing this app in INSTALLED_APPS imports nothing that
needs Django's app registry.
"""

from __future__ import annotations

_LAZY = {"from_conn_string", "afrom_conn_string", "get_saver"}


def __getattr__(name: str):
    if name == "get_saver":
        from checkpoints.store.registry import get_saver

        return get_saver
    if name in _LAZY:
        from checkpoints import connect

        return getattr(connect, name)
    raise AttributeError(f"module 'checkpoints' has no attribute {name!r}")


__all__ = sorted(_LAZY)
