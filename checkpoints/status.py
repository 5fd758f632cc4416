"""A thread's status at a glance: what an operator needs to know first.

One rule for the admin list, its filter and the thread page. The order matters: a thread
marked finished is due whatever else is true of it; a park is a promise to come back; an
interrupt waits on a person; an error needs one; the rest are recently written or idle.
A finished thread written since it was marked shows "finished, written since": the sweep
spares it (retention.sweep's run rule) until it is marked again or goes idle.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils.timesince import timeuntil

from checkpoints.channels import ERROR, INTERRUPT, RESUME  # noqa: F401 - status names them

# Written within this long ago: someone (a graph, a person) is probably still at it.
RECENT = timedelta(minutes=15)

KINDS = {
    "finished": "Finished",
    "parked": "Parked",
    "waiting_on_human": "Waiting on a human",
    "failed": "Failed",
    "recent": "Recently written",
    "idle": "Idle",
}


@dataclass(frozen=True)
class ThreadStatus:
    kind: str
    detail: str = ""

    @property
    def label(self) -> str:
        return KINDS[self.kind]


def node_of(task_path: str) -> str:
    """The node a pull task ran (``"~__pregel_pull, approve"`` -> ``approve``)."""
    head, _, rest = (task_path or "").partition(", ")
    return rest.split(",")[0].strip() if head.endswith("__pregel_pull") else ""


def _when(moment: datetime) -> str:
    return f"{moment:%Y-%m-%d %H:%M:%S %Z}".strip()


def written_since(marked_at: datetime | None, last_write_at: datetime | None) -> bool:
    """The run rule: a thread marked finished and written after the mark."""
    return marked_at is not None and last_write_at is not None and last_write_at > marked_at


def thread_status(
    *,
    now: datetime,
    last_write_at: datetime | None,
    waiting_minutes: int,
    mark_due: datetime | None = None,
    marked_at: datetime | None = None,
    park_deadline: datetime | None = None,
    interrupted: bool = False,
    question: str = "",
    node: str = "",
    error: str = "",
) -> ThreadStatus:
    """The one status a thread shows, with the detail that goes with it."""
    if mark_due is not None:
        if written_since(marked_at, last_write_at):
            return ThreadStatus(
                "finished",
                f"finished, written since: written {_when(last_write_at)}, after its mark "
                f"at {_when(marked_at)}; the sweep spares it",
            )
        if mark_due <= now:
            return ThreadStatus("finished", f"due since {_when(mark_due)}")
        return ThreadStatus("finished", f"due at {_when(mark_due)}")
    if park_deadline is not None and park_deadline > now:
        return ThreadStatus("parked", f"parked until {_when(park_deadline)}")
    if interrupted:
        asked = f"“{question}”" if question else "an interrupt"
        return ThreadStatus("waiting_on_human", f"{asked} at {node}" if node else asked)
    if error:
        return ThreadStatus("failed", error)
    if last_write_at is not None and now - last_write_at <= RECENT:
        return ThreadStatus("recent", f"written {_when(last_write_at)}")
    if last_write_at is None:
        return ThreadStatus("idle", "never written")
    due = last_write_at + timedelta(minutes=waiting_minutes)
    if due <= now:
        return ThreadStatus("idle", f"past its waiting horizon since {_when(due)}")
    return ThreadStatus("idle", f"due in {timeuntil(due, now)}")
