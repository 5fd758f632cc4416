"""Sealed values in the ORM tables: re-sealed for a copy's thread, or under a new key.

The rules are `checkpoints.store.sealing`'s; this module knows the tables and columns.
"""

from __future__ import annotations

from django.db import transaction

from checkpoints.codec.encryption import Place, rebind
from checkpoints.models import ChannelBlob, PendingWrite
from checkpoints.store.sealing import ResealResult, current_sealer

# The columns each table's place is read from, after pk, type and blob.
_PLACE_FIELDS = {
    ChannelBlob: ("thread__thread_id", "checkpoint_ns", "channel", "version"),
    PendingWrite: (
        "thread__thread_id",
        "checkpoint_ns",
        "checkpoint_id",
        "task_id",
        "idx",
        "channel",
    ),
}


def rebind_orm_row(model, item: dict, source: str, target: str) -> None:
    """Re-seal in place the ``type``/``blob`` of a copied ChannelBlob or PendingWrite row."""
    if model is ChannelBlob:
        old = Place.blob(source, item["checkpoint_ns"], item["channel"], item["version"])
    elif model is PendingWrite:
        old = Place.write(
            source,
            item["checkpoint_ns"],
            item["checkpoint_id"],
            item["task_id"],
            item["idx"],
            item["channel"],
        )
    else:
        return  # the ORM's checkpoint body is not sealed
    typed = (item["type"], None if item["blob"] is None else bytes(item["blob"]))
    item["type"], item["blob"] = rebind(typed, old, old.moved(thread_id=target))


class OrmReseal:
    """`StoreSaver.reseal` over the ORM tables (a mixin of `OrmSaver`)."""

    using: str

    def reseal(self, *, batch_size: int = 500) -> ResealResult:
        """Seal every channel value and pending write under the first key, bound to its
        place (the ORM's checkpoint body holds no values and is not sealed)."""
        sealer = current_sealer()
        result = ResealResult()
        for model, place_fields in _PLACE_FIELDS.items():
            last = 0
            while True:
                rows = list(
                    model.objects.using(self.using)
                    .filter(pk__gt=last)
                    .order_by("pk")
                    .values_list("pk", "type", "blob", *place_fields)[:batch_size]
                )
                if not rows:
                    break
                last = rows[-1][0]
                with transaction.atomic(using=self.using):
                    for pk, type_, data, *where in rows:
                        result.examined += 1
                        if data is None:
                            continue
                        at = Place.blob(*where) if model is ChannelBlob else Place.write(*where)
                        new = sealer.resealed((type_, bytes(data)), at)
                        if new is None:
                            continue
                        # Compare-and-swap: a row a writer changed meanwhile is kept.
                        swapped = (
                            model.objects.using(self.using)
                            .filter(pk=pk, type=type_, blob=data)
                            .update(type=new[0], blob=new[1])
                        )
                        if swapped:
                            result.rewritten += 1
                        else:
                            result.raced += 1
        return result
