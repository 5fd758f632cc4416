"""Threads out of a store into the export format (`records`)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from checkpoints.codec.serde import store_serializer
from checkpoints.store.planning import check_thread_id
from checkpoints.transfer.copy import TransferSummary, as_source
from checkpoints.transfer.records import TransferFormatError, header, thread_lines


def export_threads(
    source: Any,
    stream,
    *,
    thread_ids: Iterable[str] | None = None,
    since: datetime | None = None,
    progress: Callable[[TransferSummary], None] | None = None,
) -> TransferSummary:
    """Write the export format (`records`) of each thread to a binary ``stream``.

    ``since``: only threads with a checkpoint written at or after it.
    """
    src = as_source(source)
    serde = store_serializer()
    started = time.monotonic()
    summary = TransferSummary()
    wanted = None if thread_ids is None else [check_thread_id(t) for t in thread_ids]

    def put(record: dict) -> None:
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
        summary.bytes += len(line)
        stream.write(line)

    put(header(source=getattr(src, "name", "")))
    for item in src.threads(wanted):
        if isinstance(item, TransferFormatError):
            summary.refused += 1
            summary.refusals.append(item.message)
            continue
        if since is not None:
            try:
                recent = any(
                    datetime.fromisoformat(str(c.checkpoint.get("ts"))) >= since
                    for c in item.checkpoints
                )
            except (TypeError, ValueError) as exc:  # a ts no ISO time, or without a zone
                summary.refused += 1
                summary.refusals.append(
                    f"thread {item.thread_id!r}: a checkpoint's ts cannot be compared with "
                    f"since ({exc}); the thread was not exported"
                )
                continue
            if not recent:
                summary.skipped += 1
                continue
        for record in thread_lines(serde, item):
            put(record)
        summary.threads += 1
        summary.checkpoints += len(item.checkpoints)
        summary.writes += item.writes
        if progress is not None:
            progress(summary)
    summary.seconds = time.monotonic() - started
    return summary
