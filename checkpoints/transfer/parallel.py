"""An import spread over worker processes (``import_checkpoints --jobs N``).

The parent forks ``jobs`` workers, then reads the source's thread ids in batches and hands
each batch to whichever worker is free; a worker opens the source itself and copies its
batch with `copy_threads`, the one copy path, so every thread is still checked, written
whole or not at all, and skipped when the target already holds it (a second run after a
kill resumes: it skips what is there). The parent adds the workers' summaries up and
reports progress as batches finish.

Fork, not spawn: a worker inherits the configured Django (settings, app registry, the
target saver) instead of setting it up again. Every database connection the parent holds
is closed before the fork, so no worker shares a socket with it, and a worker leaves with
``os._exit`` once its results are flushed, so it never runs the parent's finalizers (a
driver closing a connection it inherited would end the parent's session).

What needs one process refuses ``--jobs`` above 1, before anything is read: a store that
lives in the process (memory), ``strict`` (all or nothing over every thread is one
transaction), and a source read in file order (an export file: each worker would read
the whole file).
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from itertools import islice
from typing import Any

from django.db import connections

from checkpoints.errors import (
    CheckpointConfigError,
    CheckpointStoreError,
    InvalidCheckpointInput,
    ThreadExists,
)
from checkpoints.store.planning import check_thread_id
from checkpoints.transfer.copy import (
    PRESENCE_BATCH,
    TransferSummary,
    copy_threads,
    presence,
    present_among,
    refuse_source_times,
)
from checkpoints.transfer.sources import FileSource

# Threads a worker takes at a time: enough that the queue's round trips vanish, few enough
# that the last batches keep every worker busy.
BATCH = 100
# How long the parent waits for a result before it checks that its workers still run.
POLL_SECONDS = 1.0

Opener = Callable[[], AbstractContextManager[Any]]


class ImportWorkerFailed(CheckpointStoreError):
    """A worker of a parallel import stopped on an error; its message names it."""

    code = "import_worker_failed"


def copy_parallel(
    open_source: Opener,
    target,
    *,
    jobs: int,
    thread_ids: Iterable[str] | None = None,
    strict: bool = False,
    progress: Callable[[TransferSummary], None] | None = None,
    **options: Any,
) -> TransferSummary:
    """`copy_threads` over ``jobs`` worker processes; ``open_source()``: a context manager
    giving the source, called once in each worker and once in the parent (for the ids).

    ``options``: `copy_threads`'s (on_conflict, verify, owner, owner_from_metadata,
    dry_run, keep_source_times, thread_metadata).
    """
    if not isinstance(jobs, int) or isinstance(jobs, bool) or jobs < 1:
        raise InvalidCheckpointInput(f"--jobs {jobs!r} must be a whole number >= 1", field="jobs")
    if getattr(target, "process_local", False):
        raise CheckpointConfigError(
            f"--jobs {jobs}: the {target.provider or 'memory'} store lives in this process, so "
            "other processes cannot write it; import with --jobs 1",
            field="jobs",
        )
    if strict:
        raise CheckpointConfigError(
            f"--jobs {jobs} with --strict: all or nothing over every thread is one process's "
            "transaction; use --jobs 1 for --strict",
            field="jobs",
        )
    refuse_source_times(target, options.get("keep_source_times", False))
    wanted = None if thread_ids is None else [check_thread_id(t) for t in thread_ids]
    ctx = multiprocessing.get_context("fork")
    tasks, results = ctx.Queue(), ctx.Queue()
    connections.close_all()  # no worker may inherit an open connection (see above)
    workers = [
        ctx.Process(
            target=_work,
            args=(open_source, target, options, tasks, results, os.getpid()),
            name=f"import-worker-{n}",
            daemon=True,
        )
        for n in range(jobs)
    ]
    for worker in workers:
        worker.start()
    summary = TransferSummary(kept_source_times=bool(options.get("keep_source_times")))
    started = time.monotonic()
    try:
        with open_source() as source:
            if isinstance(source, FileSource):
                raise CheckpointConfigError(
                    f"--jobs {jobs}: an export file is read in order, so its threads cannot "
                    "be shared out; import it with --jobs 1",
                    field="jobs",
                )
            summary.total = len(wanted) if wanted is not None else _count(source)
            if options.get("on_conflict") == "fail":
                # Refused before any worker writes: an import that would take a thread
                # over writes none.
                _refuse_present(target, wanted if wanted is not None else source.thread_ids())
            ids = iter(wanted) if wanted is not None else source.thread_ids()
            sent = _feed(tasks, ids, jobs * 2)
            done = 0
            while done < sent:
                outcome = _next(results, workers)
                if outcome[0] == "failed":
                    raise ImportWorkerFailed(f"an import worker stopped: {outcome[1]}")
                part = outcome[1]
                summary.add(part)
                summary.waiting_minutes = part.waiting_minutes
                done += 1
                sent += _feed(tasks, ids, 1)
                summary.seconds = time.monotonic() - started
                if progress is not None:
                    progress(summary)
    finally:
        for _ in workers:
            tasks.put(None)
        for worker in workers:
            worker.join(30)
            if worker.is_alive():
                worker.kill()
                worker.join()
        tasks.close()
        results.close()
    summary.seconds = time.monotonic() - started
    return summary


def _refuse_present(target, thread_ids: Iterable[str]) -> None:
    ids = iter(thread_ids)
    while chunk := list(islice(ids, PRESENCE_BATCH)):
        if getattr(target, "db_alias", None) is not None:
            found = present_among(target, chunk)
        else:
            found = {t: how for t in chunk if (how := presence(target, t)) is not None}
        for thread_id, how in found.items():
            raise ThreadExists(
                f"cannot import thread {thread_id!r}: the target already holds it ({how}); "
                "nothing was imported",
                field="thread_id",
            )


def _count(source) -> int | None:
    count = getattr(source, "count_threads", None)
    return count() if count is not None else None


def _feed(tasks, ids: Iterator[str], batches: int) -> int:
    """Queue up to ``batches`` batches of ids; how many were queued."""
    sent = 0
    for _ in range(batches):
        batch = [thread_id for _, thread_id in zip(range(BATCH), ids, strict=False)]
        if not batch:
            break
        tasks.put(batch)
        sent += 1
    return sent


def _next(results, workers) -> tuple[str, Any]:
    while True:
        try:
            return results.get(timeout=POLL_SECONDS)
        except queue.Empty:
            dead = [w for w in workers if not w.is_alive()]
            if dead:
                raise ImportWorkerFailed(
                    f"import worker {dead[0].name} ended (exit code {dead[0].exitcode}) "
                    "before its batch was done; run the import again: it skips the threads "
                    "already there"
                ) from None


def _task(tasks, parent: int) -> list[str] | None:
    """The next batch; None when told to stop or when the parent is gone (killed: the
    batch under way was finished, whole, and the next run skips it)."""
    while True:
        try:
            return tasks.get(timeout=POLL_SECONDS)
        except queue.Empty:
            if os.getppid() != parent:
                return None


def _work(open_source: Opener, target, options: dict, tasks, results, parent: int) -> None:
    """A worker: copy each batch it is given, until told to stop (a None)."""
    code = 0
    try:
        with open_source() as source:
            while (batch := _task(tasks, parent)) is not None:
                results.put(("done", copy_threads(source, target, thread_ids=batch, **options)))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which names it
        message = exc.message if isinstance(exc, CheckpointStoreError) else str(exc)
        results.put(("failed", f"{type(exc).__name__}: {message}"))
        code = 1
    finally:
        connections.close_all()
        results.close()
        results.join_thread()  # the results reach the parent before the process ends
        os._exit(code)
