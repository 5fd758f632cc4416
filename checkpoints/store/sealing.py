"""Re-sealing stored values, the rules every store shares; each store walks its own rows.

Sealed bytes are bound to their place (`checkpoints.codec.encryption`). Two operations
move or re-key them legitimately, and each saver applies these rules to its own storage:

* ``copy_thread`` (and a fork built on it) opens each value for its source place and seals
  it again for the target's (`encryption.rebind`); a copy fails, naming the place, rather
  than leave unreadable rows if a key is missing.
* ``reseal`` (``manage.py reencrypt_checkpoints``) rewrites every stored value under the
  first key in the bound format (`resealed`), replacing each only if it still holds the
  bytes read, so writers keep running and an interrupted run resumes by running again.
"""

from __future__ import annotations

from dataclasses import dataclass

from checkpoints.codec.encryption import (
    SUFFIX,
    Place,
    current_key_id,
    keyring,
    open_typed,
    seal_typed,
    sealed_format,
    sealed_key_id,
)
from checkpoints.errors import CheckpointConfigError, CheckpointEncryptionError


@dataclass
class ResealResult:
    examined: int = 0
    rewritten: int = 0
    # Values a writer changed between our read and our write: left as the writer made them.
    raced: int = 0


@dataclass(frozen=True)
class Sealer:
    """The key values are re-sealed under, and the ring that opens what they were."""

    key_id: bytes
    ring: dict

    def resealed(self, typed: tuple[str, bytes], at: Place) -> tuple[str, bytes] | None:
        """``typed`` sealed under the current key for ``at``; None when it already is."""
        if sealed_format(typed) == 2 and sealed_key_id(typed) == self.key_id:
            return None
        return seal_typed(_plaintext(typed, self.ring, at), at=at)


def current_sealer() -> Sealer:
    """The sealer for a re-seal run; CheckpointConfigError when no key is set."""
    key_id = current_key_id()
    if key_id is None:
        raise CheckpointConfigError(
            "CHECKPOINTS_ENCRYPTION_KEYS is not set: nothing to encrypt under"
        )
    _, ring = keyring()
    return Sealer(key_id, ring)


def _plaintext(typed: tuple[str, bytes], ring, at: Place) -> tuple[str, bytes]:
    type_, _ = typed
    if not type_.endswith(SUFFIX):
        return typed  # a plaintext value: this is how it gets encrypted the first time
    if sealed_key_id(typed) not in ring:
        raise CheckpointEncryptionError(f"{at} is sealed under a key that is not configured")
    # An unbound value opens whatever ENCRYPTION_REQUIRE_BOUND says: upgrading it is what
    # a re-seal is for.
    return open_typed(typed, at=at, allow_unbound=True)
