"""Every error the checkpoint store raises, under one root class.

Each class carries a stable ``code`` and the HTTP ``status`` the API answers with, so
the admin, the API, the commands and the tasks all report one failure the same way.
"""

from __future__ import annotations


class CheckpointStoreError(Exception):
    """Root of every error the store raises."""

    code = "checkpoint_store_error"
    status = 500

    def __init__(self, message: str, *, field: str | None = None):
        super().__init__(message)
        self.message = message
        self.field = field


class CheckpointConfigError(CheckpointStoreError):
    """The CHECKPOINTS settings or a saver option are wrong."""

    code = "invalid_configuration"
    status = 500


class InvalidCheckpointInput(CheckpointStoreError, ValueError):
    """A caller passed something the store cannot act on (missing thread_id, bad key...)."""

    code = "invalid_input"
    status = 400


class InvalidArgumentType(InvalidCheckpointInput, TypeError):
    """An argument of the wrong type (a bare string where a list of ids belongs): a
    TypeError as the peers raise, and our InvalidCheckpointInput."""


class ThreadNotFound(CheckpointStoreError, LookupError):
    """No checkpoint exists for the named thread."""

    code = "thread_not_found"
    status = 404


class CheckpointNotFound(CheckpointStoreError, LookupError):
    """The named checkpoint does not exist (or belongs to another thread)."""

    code = "checkpoint_not_found"
    status = 404


class AssistantNotFound(CheckpointStoreError, LookupError):
    """No registered graph makes the named assistant (the LangGraph API's read-only
    assistants are the registered graphs)."""

    code = "assistant_not_found"
    status = 404


class NotServed(CheckpointStoreError):
    """A route of LangGraph Platform's API this server does not serve (runs, streams,
    crons, the key-value store, assistant writes): it stores threads, it runs no graph."""

    code = "not_served"
    status = 501


class ThreadExists(CheckpointStoreError):
    """A thread id that must be new already holds checkpoints."""

    code = "thread_exists"
    status = 409


class ThreadVersionConflict(CheckpointStoreError):
    """The thread changed since the caller read it (If-Match on Thread.version)."""

    code = "version_conflict"
    status = 409


class MissingPermission(CheckpointStoreError, PermissionError):
    """The caller may see the thread but lacks the permission the action needs (named)."""

    code = "permission_denied"
    status = 403


class CheckpointStoreFormatError(CheckpointStoreError):
    """The store holds checkpoints in another format generation, or none recorded."""

    code = "store_format"
    status = 503


class CheckpointDeleteError(CheckpointStoreError):
    """A thread could not be emptied: writers kept re-adding rows."""

    code = "delete_failed"
    status = 500


class CheckpointCodecError(CheckpointStoreError, ValueError):
    """A value cannot be encoded, or stored bytes cannot be decoded."""

    code = "codec_error"
    status = 400


class ValueTooLarge(CheckpointCodecError):
    """A value to store, or a checkpoint's values together, is over a size limit (named,
    with its value, the size and where); refused before anything is stored: 413."""

    code = "value_too_large"
    status = 413

    def __init__(self, message: str, *, field: str | None = None, limit: str = "", size: int = 0):
        super().__init__(message, field=field)
        self.limit = limit
        self.size = size


class CheckpointEncryptionError(CheckpointStoreError):
    """A stored row is plaintext, tampered with, or under an unknown key."""

    code = "encryption_error"
    status = 500


class StoreUnavailable(CheckpointStoreError, ConnectionError):
    """The store's server could not be reached."""

    code = "store_unavailable"
    status = 503


class UnreadableValue(CheckpointCodecError):
    """Stored bytes of one checkpoint part cannot be decoded (corrupt, unknown or blocked
    type). Not the caller's fault and not a crash: 409, naming where the bytes are."""

    status = 409

    def __init__(self, message: str, *, field: str | None = None, where: dict | None = None):
        super().__init__(message, field=field)
        self.where = where or {}


class UndecryptableValue(CheckpointEncryptionError):
    """Stored sealed bytes of one checkpoint part cannot be opened (tampered, moved from
    elsewhere, unknown key, or plaintext where sealed is required); 409, naming where."""

    status = 409

    def __init__(self, message: str, *, field: str | None = None, where: dict | None = None):
        super().__init__(message, field=field)
        self.where = where or {}
