"""Every error the retention policy and the sweep raise, under one root class."""

from __future__ import annotations

from checkpoints.errors import CheckpointStoreError


class RetentionError(CheckpointStoreError):
    """Root of every retention error; a CheckpointStoreError, so entrances report it alike."""

    code = "retention_error"
    status = 400


class InvalidRetention(RetentionError, ValueError):
    """A retention value is not a whole number of minutes above zero."""

    code = "invalid_retention"
    status = 400


class RetentionTooLong(RetentionError, ValueError):
    """A declared retention is longer than its ceiling (the platform's, or the waiting one)."""

    code = "retention_too_long"
    status = 400


class ParkNotSupported(RetentionError):
    """The store cannot hold a parked run (only postgres and redis can)."""

    code = "park_not_supported"
    status = 409


class ParkRefused(RetentionError, ValueError):
    """A park has no deadline, or one outside the thread's waiting horizon."""

    code = "park_refused"
    status = 400


class HoldRefused(RetentionError, ValueError):
    """A hold without a reason, or with an end time that is not ahead."""

    code = "hold_refused"
    status = 400


class SweepAlreadyRunning(RetentionError):
    """Another sweep holds this store's sweep lock."""

    code = "sweep_already_running"
    status = 409


class LiveFilterFailed(RetentionError):
    """A live-thread filter raised or answered nonsense; the sweep stops, deleting no more."""

    code = "live_filter_failed"
    status = 500

    def __init__(self, message: str, *, owner: str):
        super().__init__(message, field="LIVE_THREAD_FILTERS")
        self.owner = owner


class SweepFailed(RetentionError):
    """The sweep stopped on an unexpected error (the store went away, say); its run record
    says failed and counts what it did delete."""

    code = "sweep_failed"
    status = 503
