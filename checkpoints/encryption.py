"""Moved to :mod:`checkpoints.codec.encryption`; this name stays importable meanwhile."""

from checkpoints.codec.encryption import (  # noqa: F401
    BOUND,
    SUFFIX,
    Place,
    current_key_id,
    encryption_enabled,
    keyring,
    open_typed,
    parse_key,
    rebind,
    seal_typed,
    sealed_format,
    sealed_key_id,
)
