"""Seed a big checkpoint store with set-based SQL: threads, checkpoints and status facts.

Shared by `bench.sweep` (its store of 100,000 threads) and the console's scale test
(tests/checkpoints/admin/test_scale.py). Importing it changes no setting: the callers have
configured Django already.
"""

from __future__ import annotations

from datetime import timedelta

# What the status facts are seeded on, by ``thread row id % 100``: one thread in a hundred
# waits on an interrupt at its head, one in a hundred failed there.
INTERRUPTED_REST = 7
FAILED_REST = 17
# One thread in ten is marked finished (due tomorrow); in the bench, one in ten of the
# threads written an hour ago was written five minutes ago instead.
MARKED_REST = 3
RECENT_REST = 9


def tables() -> dict[str, str]:
    from checkpoints.models import ChannelBlob, Checkpoint, PendingWrite, Thread

    return {m.__name__: m._meta.db_table for m in (Thread, Checkpoint, ChannelBlob, PendingWrite)}


def has_column(cur, table: str, column: str) -> bool:
    cur.execute(
        "SELECT 1 FROM information_schema.columns WHERE table_name = %s AND column_name = %s",
        [table, column],
    )
    return cur.fetchone() is not None


def checkpoint_body(cur) -> bytes:
    """An empty checkpoint's body, encoded as the store keeps it (channels apart)."""
    from langgraph.checkpoint.base import empty_checkpoint

    from checkpoints.store.contract import strict_serializer

    split = has_column(cur, tables()["Checkpoint"], "channel_versions")
    dropped = ("channel_values", "channel_versions") if split else ("channel_values",)
    return strict_serializer().dumps_typed(
        {k: v for k, v in empty_checkpoint().items() if k not in dropped}
    )[1]


def id_prefix(unique_ids: bool) -> str:
    """The SQL that starts a seeded checkpoint id of thread row ``th`` (see `seed`)."""
    return "lpad(th.id::text, 12, '0') || '-' || " if unique_ids else ""


def seed(
    cur,
    *,
    first: int,
    last: int,
    age: timedelta,
    per_thread: int,
    body: bytes,
    now,
    unique_ids: bool = False,
) -> None:
    """Threads first..last, each with ``per_thread`` checkpoints, a blob each, and one write.

    ``unique_ids`` makes checkpoint ids unique store-wide (the thread's row id, then the
    step), as LangGraph's are; by default every thread reuses the same few ids, which
    leaves the store-wide checkpoint list with ties on every id.
    """
    t = tables()
    prefix = id_prefix(unique_ids)
    written = now - age
    cur.execute(
        f'INSERT INTO "{t["Thread"]}" (thread_id, created_at, last_write_at, version) '
        "SELECT 'sweep-' || g, %s, %s, 1 FROM generate_series(%s, %s) g",
        [written, written, first, last],
    )
    threads = (
        f'FROM "{t["Thread"]}" th WHERE th.thread_id IN '
        "(SELECT 'sweep-' || g FROM generate_series(%s, %s) g)"
    )
    each = threads.replace(" WHERE", " CROSS JOIN generate_series(1, %s) s WHERE")
    # Newer stores keep channel versions in a column of their own.
    versions = has_column(cur, t["Checkpoint"], "channel_versions")
    cur.execute(
        f'INSERT INTO "{t["Checkpoint"]}" (thread_id, checkpoint_ns, checkpoint_id, '
        "parent_checkpoint_id, type, checkpoint, metadata, source, step, durability, created_at"
        + (", channel_versions" if versions else "")
        + f") SELECT th.id, '', {prefix}lpad(s::text, 8, '0'), "
        f"CASE WHEN s > 1 THEN {prefix}lpad((s - 1)::text, 8, '0') END, 'msgpack', %s, "
        "jsonb_build_object('source', 'loop', 'step', s), 'loop', s, 'disk', th.last_write_at"
        + (", '{}'::jsonb " if versions else " ")
        + each,
        [body, per_thread, first, last],
    )
    cur.execute(
        f'INSERT INTO "{t["ChannelBlob"]}" '
        "(thread_id, checkpoint_ns, channel, version, type, blob) "
        "SELECT th.id, '', 'messages', lpad(s::text, 8, '0'), 'msgpack', "
        "convert_to(repeat('m', 200), 'UTF8') " + each,
        [per_thread, first, last],
    )
    cur.execute(
        f'INSERT INTO "{t["PendingWrite"]}" (thread_id, checkpoint_ns, checkpoint_id, task_id, '
        "task_path, idx, channel, type, blob) "
        f"SELECT th.id, '', {prefix}lpad(%s::text, 8, '0'), 'task', '', 0, 'route', 'msgpack', "
        "convert_to('x', 'UTF8') " + threads,
        [per_thread, first, last],
    )


def seed_status_writes(
    cur, *, saver, per_thread: int, unique_ids: bool, skip: tuple[str, ...] = ()
) -> None:
    """An interrupt write (a valid encoded ``Interrupt``) at the head of one thread in a
    hundred and an error write at the head of another, of the threads `seed` made with
    ``per_thread`` checkpoints (``skip``: thread ids seeded with another depth)."""
    from langgraph.types import Interrupt

    from checkpoints.channels import ERROR, INTERRUPT
    from checkpoints.codec.encryption import Place

    head = f"{id_prefix(unique_ids)}lpad(%s::text, 8, '0')"
    _, question = saver._dump(
        [Interrupt(value="approve the refund?", id="bench")],
        Place.write("sweep-7", "", f"{per_thread:08d}", INTERRUPT, 0, INTERRUPT),
    )
    for channel, rest, blob in (
        (INTERRUPT, INTERRUPTED_REST, question),
        (ERROR, FAILED_REST, b"x"),
    ):
        cur.execute(
            f'INSERT INTO "{tables()["PendingWrite"]}" (thread_id, checkpoint_ns, '
            "checkpoint_id, task_id, task_path, idx, channel, type, blob) "
            f"SELECT th.id, '', {head}, %s, '~__pregel_pull, approve', 0, %s, 'msgpack', %s "
            f'FROM "{tables()["Thread"]}" th WHERE th.id %% 100 = %s '
            "AND NOT (th.thread_id = ANY(%s))",
            [per_thread, channel, channel, blob, rest, list(skip)],
        )


def mark_finished(cur, *, now, rest: int = MARKED_REST) -> None:
    """Finished marks, due tomorrow, on one thread in ten (``thread row id % 10 = rest``)."""
    from checkpoints.models import FinishedMark

    cur.execute(
        f'INSERT INTO "{FinishedMark._meta.db_table}" (thread_id, marked_at, due_at, owner) '
        f"SELECT thread_id, %s, %s, 'ops' FROM \"{tables()['Thread']}\" WHERE id %% 10 = %s "
        "ON CONFLICT DO NOTHING",
        [now - timedelta(hours=1), now + timedelta(hours=23), rest],
    )


def mark_some_finished(cur, count: int, now) -> None:
    """Finished marks on the first ``count`` threads (the oldest), due tomorrow."""
    from checkpoints.models import FinishedMark

    cur.execute(
        f'INSERT INTO "{FinishedMark._meta.db_table}" (thread_id, marked_at, due_at, owner) '
        "SELECT 'sweep-' || g, %s, %s, 'bench' FROM generate_series(1, %s) g "
        "ON CONFLICT DO NOTHING",
        [now, now + timedelta(days=1), count],
    )


def make_recent(cur, *, now, written_after, rest: int = RECENT_REST) -> None:
    """One in ten of the threads last written after ``written_after`` was written five
    minutes ago instead (the status rule's "recent")."""
    cur.execute(
        f'UPDATE "{tables()["Thread"]}" SET last_write_at = %s '
        "WHERE id %% 10 = %s AND last_write_at > %s",
        [now - timedelta(minutes=5), rest, written_after],
    )


def seed_side_tables(using: str, now, *, provider: str = "postgres") -> None:
    """Parks (2,000, live), holds (500, open), sweep runs (500) and audit events (5,000) on
    the first threads, in database ``using``: the rows the console's other lists show and
    the status rule's claims."""
    from checkpoints.models import AuditEvent
    from retention.models import Hold, Park, SweepRun

    Park.objects.using(using).bulk_create(
        Park(
            thread_id=f"sweep-{i}",
            deadline=now + timedelta(hours=1 + i % 48),
            created_at=now,
            provider=provider,
        )
        for i in range(1, 2001)
    )
    Hold.objects.using(using).bulk_create(
        Hold(
            thread_id=f"sweep-{i}",
            provider=provider,
            reason="refund dispute",
            until=None if i % 2 else now + timedelta(days=7),
            created_at=now,
            created_by="ops",
        )
        for i in range(2001, 2501)
    )
    SweepRun.objects.using(using).bulk_create(
        SweepRun(
            started_at=now - timedelta(hours=i),
            finished_at=now,
            provider=provider,
            waiting_minutes=10080,
            finished_minutes=1440,
            swept_count=i,
        )
        for i in range(500)
    )
    AuditEvent.objects.using(using).bulk_create(
        AuditEvent(
            action="mark_finished",
            origin="api",
            actor="ops",
            thread_id=f"sweep-{i}",
            provider=provider,
        )
        for i in range(1, 5001)
    )
