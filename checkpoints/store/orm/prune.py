"""Prune on the ORM store: the pure plan (`planning.prune_plan`) applied to its tables.

A mixin of `OrmSaver`, which supplies ``using`` and ``_thread_pk``.
"""

from __future__ import annotations

from collections import defaultdict

from django.db import transaction

from checkpoints.models import ChannelBlob, PendingWrite
from checkpoints.models import Checkpoint as CheckpointRow
from checkpoints.store.orm.internals import raw_delete
from checkpoints.store.planning import PruneRow, delta_channels, prune_thread_plan, root_of

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
        plans = prune_thread_plan(by_ns, keep_last, lambda ns: self._seeded(pk, ns))
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
        db = self.using
        referenced: set[tuple[str, str, str]] = set()
        for ns, versions in (
            CheckpointRow.objects.using(db)
            .filter(thread_id=pk)
            .values_list("checkpoint_ns", "channel_versions")
            .iterator(chunk_size=500)
        ):
            for channel, version in (versions or {}).items():
                referenced.add((ns, channel, str(version)))
        stale = [
            blob_pk
            for blob_pk, ns, channel, version in ChannelBlob.objects.using(db)
            .filter(thread_id=pk)
            .values_list("pk", "checkpoint_ns", "channel", "version")
            if (ns, channel, version) not in referenced
        ]
        for start in range(0, len(stale), 500):
            raw_delete(ChannelBlob.objects.using(db).filter(pk__in=stale[start : start + 500]))
