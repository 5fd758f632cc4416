"""A thread's record on the LangGraph API: its metadata row, and the graph that owns it.

The graph choice is the Platform's: the ``graph_id`` a new thread's metadata names, else
its record's, else its head's, else the only graph registered; a name not registered in
``CHECKPOINTS["GRAPHS"]`` chooses none, and updates then take the graph-less fallback.
"""

from __future__ import annotations

from checkpoints.graphs import graph_name_of, registered, time_travel_for
from checkpoints.langgraph_api.models import ThreadMetadata
from checkpoints.timetravel.snapshot import thread_config


def metadata_row(saver, thread_id: str) -> ThreadMetadata | None:
    return ThreadMetadata.objects.filter(provider=saver.provider, thread_id=thread_id).first()


def metadata_rows(saver, thread_ids: list[str] | None) -> dict[str, ThreadMetadata]:
    """thread id -> its metadata row, in one query: of ``thread_ids``, or of every thread
    of the store (None)."""
    rows = ThreadMetadata.objects.filter(provider=saver.provider)
    if thread_ids is not None:
        rows = rows.filter(thread_id__in=thread_ids)
    return {row.thread_id: row for row in rows}


def graph_name(saver, thread_id: str, metadata: dict | None = None) -> str | None:
    """The registered graph of the thread: the graph_id of ``metadata`` (a new thread's),
    of its record or of its head, else the only one registered; None: no registered one."""
    graphs = registered()
    if not graphs:
        return None
    name = graph_name_of(metadata)
    if name is None:
        row = metadata_row(saver, thread_id)
        name = graph_name_of(row.metadata if row else None)
    if name is None:
        head = saver.get_tuple(thread_config(thread_id))
        name = graph_name_of(head.metadata if head else None)
    if name is None and len(graphs) == 1:
        name = next(iter(graphs))
    return name if name in graphs else None


def travel(saver, thread_id: str):
    """Time travel knowing the thread's graph, so its channels' defaults show as LangGraph's."""
    return time_travel_for(saver, thread_id, graph_name(saver, thread_id))
