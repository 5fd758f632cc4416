"""A thread's declared retention and the horizons in force: the one rule retention's
policy, the sweep and every ledger read."""

from __future__ import annotations

from dataclasses import dataclass

from checkpoints.conf import setting


@dataclass(frozen=True)
class ThreadRetention:
    """The retention a thread's owner declared; None means the platform's value."""

    waiting_minutes: int | None = None
    finished_minutes: int | None = None

    @classmethod
    def platform(cls) -> ThreadRetention:
        """The deployment's values (``RETENTION_*_MINUTES``): every thread's default."""
        return cls(
            int(setting("RETENTION_WAITING_MINUTES")), int(setting("RETENTION_FINISHED_MINUTES"))
        )

    def in_force(self, platform: ThreadRetention | None = None) -> ThreadRetention:
        """The horizons in force: each declared value over the platform's; an unset finished
        is the platform's, capped at the waiting in force. The one rule (the sweep's SQL
        form: `idle_writes` of the ORM ledger; Redis's: its scripts' TTL)."""
        platform = platform or ThreadRetention.platform()
        waiting = self.waiting_in_force(platform.waiting_minutes)
        finished = self.finished_minutes or min(platform.finished_minutes, waiting)
        return ThreadRetention(waiting, finished)

    def waiting_in_force(self, platform_waiting: int) -> int:
        """The waiting horizon in force, given the platform's (see `in_force`)."""
        return self.waiting_minutes or platform_waiting
