"""Rewrite stored values under the current encryption key, batch by batch."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction

from checkpoints.encryption import SUFFIX, current_key_id, keyring, seal_typed, sealed_key_id
from checkpoints.errors import CheckpointConfigError, CheckpointEncryptionError
from checkpoints.models import ChannelBlob, PendingWrite


@dataclass
class ReencryptResult:
    examined: int = 0
    rewritten: int = 0


def reencrypt_rows(*, using: str = "default", batch_size: int = 500) -> ReencryptResult:
    """Seal every blob and pending write under the first key.

    Each batch commits on its own, and rows already under the current key are skipped, so
    an interrupted run is resumed by running it again.
    """
    key_id = current_key_id()
    if key_id is None:
        raise CheckpointConfigError(
            "CHECKPOINTS_ENCRYPTION_KEYS is not set: nothing to encrypt under"
        )
    _, ring = keyring()
    result = ReencryptResult()
    for model in (ChannelBlob, PendingWrite):
        last = 0
        while True:
            with transaction.atomic(using=using):
                rows = list(
                    model.objects.using(using)
                    .select_for_update()
                    .filter(pk__gt=last)
                    .order_by("pk")
                    .values_list("pk", "type", "blob")[:batch_size]
                )
                if not rows:
                    break
                last = rows[-1][0]
                for pk, type_, data in rows:
                    result.examined += 1
                    if data is None or sealed_key_id((type_, data)) == key_id:
                        continue
                    plain = _plaintext(type_, bytes(data), ring, f"{model.__name__} {pk}")
                    new_type, new_data = seal_typed(plain)
                    model.objects.using(using).filter(pk=pk).update(type=new_type, blob=new_data)
                    result.rewritten += 1
    return result


def _plaintext(type_: str, data: bytes, ring, where: str) -> tuple[str, bytes]:
    from checkpoints.encryption import open_typed

    if not type_.endswith(SUFFIX):
        return type_, data  # a plaintext row: this is how it gets encrypted the first time
    if sealed_key_id((type_, data)) not in ring:
        raise CheckpointEncryptionError(f"{where} is sealed under a key that is not configured")
    return open_typed((type_, data), where=where)
