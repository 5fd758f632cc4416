"""Prune on the ORM store: the pure plan (`planning.prune_plan`) applied to its tables.

A mixin of `OrmSaver`, which supplies ``using`` and ``_thread_pk``.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace

from django.db import transaction

from checkpoints.channels import TASKS
from checkpoints.models import ChannelBlob, PendingWrite, Thread
from checkpoints.models import Checkpoint as CheckpointRow
from checkpoints.store.orm.internals import raw_delete
from checkpoints.store.planning.parent_sends import needs_parent_sends
from checkpoints.store.planning.prune import PruneRow, delta_channels, prune_thread_plan, root_of

# The type tag of a channel version stored as "no value" (LangGraph's empty channel).
EMPTY = "empty"


class OrmPrune:
    using: str

    def _prune_thread(self, thread_id: str, keep_last: int) -> int:
        with transaction.atomic(using=self.using):
            pk = self._thread_pk(thread_id)
            if pk is None:
                return 0
            return self._prune_pk(pk, keep_last)

    def _prune_pk(self, pk: int, keep_last: int, only_ns: str | None = None) -> int:
        """Delete what `planning.prune_thread_plan` says (the newest ``keep_last`` per
        namespace stay, with the ancestors their delta channels replay from), with their
        writes and unused blobs."""
        db = self.using
        # Taken first, as a put's upsert of the thread row takes it: a put racing the prune
        # commits before it or after it, never between its reading which blobs are used
        # and its deleting the rest (which lost a racing put's new blobs). SQLite's
        # IMMEDIATE transactions hold the write lock from their start anyway.
        list(Thread.objects.using(db).select_for_update().filter(pk=pk).values_list("pk"))
        rows = CheckpointRow.objects.using(db).filter(thread_id=pk)
        if only_ns is not None:
            rows = rows.filter(checkpoint_ns=only_ns)
            # Cheap exit on the put path: nothing to do while under the cap.
            if rows.count() <= keep_last:
                return 0
        listing = list(
            rows.order_by("checkpoint_ns", "-checkpoint_id").values_list(
                "checkpoint_ns",
                "checkpoint_id",
                "parent_checkpoint_id",
                "metadata",
                "channel_versions",
            )
        )
        by_ns: dict[str, list[PruneRow]] = defaultdict(list)
        for ns, cid, parent, metadata, versions in listing:
            by_ns[ns].append(
                PruneRow(cid, parent, delta_channels(metadata), versions or {}, root_of(metadata))
            )
        self._mark_sends_parents(pk, by_ns, keep_last)
        plans = prune_thread_plan(
            by_ns,
            keep_last,
            lambda ns: self._seeded(pk, ns),
            lambda ns: self._stored(pk, ns, by_ns[ns], keep_last),
        )
        doomed = [(ns, cid) for ns, ids in plans.items() for cid in ids]
        if not doomed:
            return 0
        by_ns_ids: dict[str, list[str]] = defaultdict(list)
        for ns, cid in doomed:
            by_ns_ids[ns].append(cid)
        for ns, ids in by_ns_ids.items():
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                for model in (PendingWrite, CheckpointRow):
                    raw_delete(
                        model.objects.using(db).filter(
                            thread_id=pk, checkpoint_ns=ns, checkpoint_id__in=chunk
                        )
                    )
                # A kept checkpoint whose parent went has none (planning.prune_plan).
                CheckpointRow.objects.using(db).filter(
                    thread_id=pk, checkpoint_ns=ns, parent_checkpoint_id__in=chunk
                ).update(parent_checkpoint_id=None)
        self._drop_unreferenced_blobs(pk)
        return len(doomed)

    def _mark_sends_parents(self, pk: int, by_ns: dict[str, list[PruneRow]], keep_last: int):
        """Set ``sends_parent`` on the checkpoints a prune keeps that predate format v4
        and whose parent holds pending sends (the ORM stores migrate them as they read):
        one query per namespace, and a body read only for a head whose parent has some."""
        db = self.using
        for ns, rows in by_ns.items():
            heads = rows[:keep_last]  # newest first
            parents = {row.parent_id for row in heads if row.parent_id}
            if not parents:
                continue
            with_sends = set(
                PendingWrite.objects.using(db)
                .filter(thread_id=pk, checkpoint_ns=ns, checkpoint_id__in=parents, channel=TASKS)
                .values_list("checkpoint_id", flat=True)
            )
            for n, row in enumerate(heads):
                if row.parent_id not in with_sends:
                    continue
                typed = (
                    CheckpointRow.objects.using(db)
                    .filter(thread_id=pk, checkpoint_ns=ns, checkpoint_id=row.checkpoint_id)
                    .values_list("type", "checkpoint")
                    .first()
                )
                body = self.serde.loads_typed((typed[0], bytes(typed[1]))) if typed else {}
                if needs_parent_sends(body, row.parent_id):
                    rows[n] = replace(row, sends_parent=row.parent_id)

    def _stored(self, pk: int, ns: str, rows: list[PruneRow], keep_last: int):
        """Whether the namespace stores anything (a value or "no value") for a channel
        version: one query, for the versions the checkpoints kept first name (the newest
        ``keep_last`` of ``rows``, newest first, and the parents they read sends from)."""
        heads = rows[:keep_last]
        kept = {row.sends_parent for row in heads} | {row.checkpoint_id for row in heads}
        versions = {
            str(v) for row in rows if row.checkpoint_id in kept for v in row.versions.values()
        }
        found = set(
            ChannelBlob.objects.using(self.using)
            .filter(thread_id=pk, checkpoint_ns=ns, version__in=versions)
            .values_list("channel", "version")
        )
        return lambda channel, version: (channel, version) in found

    def _seeded(self, pk: int, ns: str):
        """Whether the namespace stores a value (not "no value") for a channel version."""

        def has_value(channel: str, version: str) -> bool:
            return (
                ChannelBlob.objects.using(self.using)
                .filter(thread_id=pk, checkpoint_ns=ns, channel=channel, version=version)
                .exclude(type=EMPTY)
                .exists()
            )

        return has_value

    def _drop_unreferenced_blobs(self, pk: int) -> None:
        self._drop_blobs_but(pk, self._referenced_blobs(pk))

    def _referenced_blobs(self, pk: int) -> set[tuple[str, str, str]]:
        """(ns, channel, version) of every blob a checkpoint of the thread reads."""
        referenced: set[tuple[str, str, str]] = set()
        for ns, versions in (
            CheckpointRow.objects.using(self.using)
            .filter(thread_id=pk)
            .values_list("checkpoint_ns", "channel_versions")
            .iterator(chunk_size=500)
        ):
            for channel, version in (versions or {}).items():
                referenced.add((ns, channel, str(version)))
        return referenced

    def _drop_blobs_but(self, pk: int, referenced: set[tuple[str, str, str]]) -> None:
        db = self.using
        stale = [
            blob_pk
            for blob_pk, ns, channel, version in ChannelBlob.objects.using(db)
            .filter(thread_id=pk)
            .values_list("pk", "checkpoint_ns", "channel", "version")
            if (ns, channel, version) not in referenced
        ]
        for start in range(0, len(stale), 500):
            raw_delete(ChannelBlob.objects.using(db).filter(pk__in=stale[start : start + 500]))
