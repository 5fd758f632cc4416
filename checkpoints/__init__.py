"""Durable LangGraph checkpoints on Django.

``from checkpoints import from_conn_string`` (and ``afrom_conn_string``) open a saver from a
URL. They are loaded on first use, so listing this app in INSTALLED_APPS imports nothing
that needs Django's app registry.
"""

from __future__ import annotations

_LAZY = {"from_conn_string", "afrom_conn_string"}


def __getattr__(name: str):
    if name in _LAZY:
        from checkpoints import connect

        return getattr(connect, name)
    raise AttributeError(f"module 'checkpoints' has no attribute {name!r}")


__all__ = sorted(_LAZY)
