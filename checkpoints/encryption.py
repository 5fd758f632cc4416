"""Moved to :mod:`checkpoints.codec.encryption`; this name stays importable meanwhile."""

from checkpoints.codec.encryption import (  # noqa: F401
    SUFFIX,
    current_key_id,
    encryption_enabled,
    keyring,
    open_typed,
    parse_key,
    seal_typed,
    sealed_key_id,
)
