"""Admin console for the checkpoint store: threads, checkpoints, changes, rollback and fork.

Lists come from the ORM tables (fast, indexed); decoded values come from the saver of the
same store (`store_saver().get_tuple`), so the admin shows exactly what a graph would load.
The store is the deployment's own unless the provider filter names another ORM database;
every link then carries that choice, so no page mixes rows of two databases. Every
page here is read-only; rollback and fork go through a confirmation page and a POST.
Retention (marks, parks, the sweep) is added by `retention/admin.py`, which imports this
module, never the reverse.
"""

# act registers its thread-page extension (edit state, resume calls, branches) on ThreadAdmin.
from checkpoints.admin import act  # noqa: F401
from checkpoints.admin.audit import AuditEventAdmin
from checkpoints.admin.base import (
    HEAD_ROWS,
    ReadOnlyMixin,
    StoreChoiceMixin,
    checkpoint_change_url,
    history_url,
    thread_change_url,
)
from checkpoints.admin.filters import FinishedFilter, ProviderFilter, StatusFilter
from checkpoints.admin.history import CheckpointAdmin
from checkpoints.admin.history_list import JUMPS, HistoryChangeList
from checkpoints.admin.threads import ThreadAdmin

__all__ = [
    "HEAD_ROWS",
    "JUMPS",
    "AuditEventAdmin",
    "CheckpointAdmin",
    "FinishedFilter",
    "HistoryChangeList",
    "ProviderFilter",
    "ReadOnlyMixin",
    "StatusFilter",
    "StoreChoiceMixin",
    "ThreadAdmin",
    "checkpoint_change_url",
    "history_url",
    "thread_change_url",
]
