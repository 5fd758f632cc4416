"""Opt-in authenticated encryption (AES-256-GCM) of stored values, bound to their place.

``CHECKPOINTS["ENCRYPTION_KEYS"]`` lists urlsafe-base64 32-byte keys: the first encrypts,
every one decrypts. A sealed value's type tag ends in ``+aesgcm``. With keys set, a
plaintext row fails the read; without keys, a sealed row fails the read naming the missing
setting.

Formats of the sealed bytes:

* bound (format 2, written today): ``0x02 | key id (8) | nonce (12) | ciphertext+tag``. The
  associated data is the :class:`Place` the value is stored at: the store id, the kind,
  the type tag, thread id and namespace, and for a channel value its channel and version,
  for a pending write its checkpoint id, task id, index and channel, for a checkpoint body
  its checkpoint id. A value copied to another thread, namespace, channel, version,
  checkpoint, task or index (relocation, swap, replay) fails authentication, and the
  refusal names the place it was read at. The one legitimate move, ``copy_thread``,
  re-seals every value for its new place with :func:`rebind` (a fork reads the source
  and writes the new thread afresh, so its values are sealed for it already). Not
  detected: an older value put back at the very same place it was overwritten at (a
  re-put checkpoint id, an upserted special write), which would take a per-place counter.
  The ORM stores the checkpoint body (ids, versions seen; no channel values) unsealed.
* unbound (format 1, written before): ``key id (8) | nonce (12) | ciphertext+tag`` with only
  the type tag authenticated. Still read until the deployment sets
  ``CHECKPOINTS["ENCRYPTION_REQUIRE_BOUND"] = True``, after which it is refused;
  ``manage.py reencrypt_checkpoints`` rewrites such rows in the bound format first.

The store id is ``CHECKPOINTS["ENCRYPTION_STORE_ID"]`` (default empty), a label the
deployment picks once per store and never changes. It is a setting, not derived: a
host/port/database name changes on failover, restore or a move and would make every row
undecryptable, and an id recorded inside the store travels with its backups and copies
anyway. Deployments whose stores share keys set a distinct id per store (better still,
distinct keys), so a value lifted from one store is refused by another.

Metadata is never sealed: it stays plaintext so ``list(filter=...)``, the API's
``metadata.`` filters and the admin search keep running inside the database (JSON
operators on PostgreSQL and SQLite, Lua on Redis), which cannot see into ciphertext. A
deterministic or blind-index encryption of metadata values would keep equality filters
but leak equality across rows and lose range/containment filters, for values LangGraph
fills with step, source and parents. So: do not put secrets in metadata; put them in
channel values, which are sealed. Metadata would only be sealed together with dropping
database-side filtering, which this store does not do.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from checkpoints.conf import setting
from checkpoints.errors import CheckpointConfigError, CheckpointEncryptionError

if TYPE_CHECKING:
    from collections.abc import Callable

    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

SUFFIX = "+aesgcm"
_KEY_ID_BYTES = 8
_NONCE_BYTES = 12
# The first byte of a bound (format 2) sealed value; format 1 starts with the key id.
BOUND = b"\x02"
_AD_PREFIX = b"checkpoint-store sealed v2\0"


def _key_id(key: bytes) -> bytes:
    return hashlib.sha256(b"checkpoint-store key id" + key).digest()[:_KEY_ID_BYTES]


def parse_key(text: str, position: int) -> bytes:
    """The 32 raw bytes of one configured key; the error names its position, never its value."""
    try:
        raw = base64.urlsafe_b64decode(text.strip() + "=" * (-len(text.strip()) % 4))
    except (binascii.Error, ValueError) as exc:
        raise CheckpointConfigError(
            f"CHECKPOINTS_ENCRYPTION_KEYS key #{position} is not urlsafe base64"
        ) from exc
    if len(raw) != 32:
        raise CheckpointConfigError(
            f"CHECKPOINTS_ENCRYPTION_KEYS key #{position} decodes to {len(raw)} bytes; "
            'AES-256 needs 32 (make one with `python -c "import base64,os;'
            'print(base64.urlsafe_b64encode(os.urandom(32)).decode())"`)'
        )
    return raw


@lru_cache(maxsize=8)
def _keyring(keys: tuple[str, ...]) -> tuple[tuple[bytes, AESGCM] | None, dict[bytes, AESGCM]]:
    if not keys:
        return None, {}  # no encryption: cryptography is not even loaded
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    parsed = [parse_key(k, i) for i, k in enumerate(keys, start=1)]
    ring = {_key_id(k): AESGCM(k) for k in parsed}
    current = (_key_id(parsed[0]), ring[_key_id(parsed[0])]) if parsed else None
    return current, ring


def keyring():
    return _keyring(tuple(setting("ENCRYPTION_KEYS") or ()))


def encryption_enabled() -> bool:
    return bool(setting("ENCRYPTION_KEYS"))


def current_key_id() -> bytes | None:
    current, _ = keyring()
    return current[0] if current else None


@dataclass(frozen=True)
class Place:
    """Where a sealed value is stored; its fields are the value's associated data."""

    kind: str  # "body", "channel" or "write"
    thread_id: str
    ns: str
    checkpoint_id: str = ""
    channel: str = ""
    version: str = ""
    task_id: str = ""
    idx: int | None = None

    @classmethod
    def body(cls, thread_id: str, ns: str, checkpoint_id: str) -> Place:
        return cls("body", thread_id, ns, checkpoint_id=checkpoint_id)

    @classmethod
    def blob(cls, thread_id: str, ns: str, channel: str, version: Any) -> Place:
        return cls("channel", thread_id, ns, channel=channel, version=str(version))

    @classmethod
    def write(
        cls, thread_id: str, ns: str, checkpoint_id: str, task_id: str, idx: int, channel: str
    ) -> Place:
        return cls(
            "write",
            thread_id,
            ns,
            checkpoint_id=checkpoint_id,
            task_id=task_id,
            idx=int(idx),
            channel=channel,
        )

    def moved(self, *, thread_id: str) -> Place:
        return replace(self, thread_id=thread_id)

    def __str__(self) -> str:
        where = f"thread {self.thread_id!r}" + (f" namespace {self.ns!r}" if self.ns else "")
        if self.kind == "channel":
            return f"channel {self.channel!r} version {self.version!r} in {where}"
        if self.kind == "write":
            return (
                f"pending write {self.idx} ({self.channel!r}) of task {self.task_id!r} at "
                f"checkpoint {self.checkpoint_id!r} in {where}"
            )
        return f"body of checkpoint {self.checkpoint_id!r} in {where}"

    def associated_data(self, type_tag: str) -> bytes:
        fields = (
            str(setting("ENCRYPTION_STORE_ID") or ""),
            self.kind,
            type_tag,
            self.thread_id,
            self.ns,
            self.checkpoint_id,
            self.channel,
            self.version,
            self.task_id,
            "" if self.idx is None else str(self.idx),
        )
        # Length-prefixed, so no two different places share one encoding.
        return _AD_PREFIX + b"".join(
            len(b := f.encode("utf-8", "surrogatepass")).to_bytes(4, "big") + b for f in fields
        )


def seal_typed(
    typed: tuple[str, bytes | None], *, at: Place | Callable[[], Place]
) -> tuple[str, bytes | None]:
    """Encrypt a (type, bytes) pair for ``at`` under the first key; unchanged when off.

    ``at`` may be a function making the place, called only when there is a key.
    """
    type_, data = typed
    current, _ = keyring()
    if current is None or data is None:
        return typed
    if callable(at):
        at = at()
    key_id, aead = current
    nonce = os.urandom(_NONCE_BYTES)
    sealed_type = type_ + SUFFIX
    body = aead.encrypt(nonce, bytes(data), at.associated_data(sealed_type))
    return sealed_type, BOUND + key_id + nonce + body


def sealed_format(typed: tuple[str, bytes | None]) -> int:
    """0 for plaintext (or no bytes), 1 for the unbound format, 2 for the bound one."""
    type_, data = typed
    if data is None or not type_.endswith(SUFFIX):
        return 0
    data = bytes(data)
    if data[:1] == BOUND:
        _, ring = keyring()
        # An unbound value whose key id happens to start with 0x02 is told apart by the
        # key ids configured; with neither matching the bound reading is reported.
        if data[1 : 1 + _KEY_ID_BYTES] in ring or data[:_KEY_ID_BYTES] not in ring:
            return 2
    return 1


def open_typed(
    typed: tuple[str, bytes | None],
    *,
    at: Place | None = None,
    where: str | None = None,
    allow_unbound: bool = False,
) -> tuple[str, bytes]:
    """The plaintext (type, bytes) of a pair sealed for ``at``; refuses plaintext when keys
    are set, a value sealed for another place, and an unbound one once
    ``ENCRYPTION_REQUIRE_BOUND`` is set."""
    type_, data = typed
    where = where or (str(at) if at is not None else "stored value")
    _, ring = keyring()
    if data is None:
        return typed
    if not type_.endswith(SUFFIX):
        if ring:
            raise CheckpointEncryptionError(
                f"{where} is stored in plaintext but CHECKPOINTS_ENCRYPTION_KEYS is set: refusing "
                "to load an unauthenticated row (run `manage.py reencrypt_checkpoints`)"
            )
        return typed
    if not ring:
        raise CheckpointEncryptionError(
            f"{where} is encrypted but CHECKPOINTS_ENCRYPTION_KEYS is not set"
        )
    data = bytes(data)
    fmt = sealed_format((type_, data))
    if fmt == 1:
        if setting("ENCRYPTION_REQUIRE_BOUND") and not allow_unbound:
            raise CheckpointEncryptionError(
                f"{where} is sealed in the unbound format (not tied to its place) and "
                'CHECKPOINTS["ENCRYPTION_REQUIRE_BOUND"] is set: refusing it (run '
                "`manage.py reencrypt_checkpoints` before declaring the upgrade done)"
            )
        associated = type_.encode()
    elif at is None:
        raise CheckpointEncryptionError(f"{where} is bound to a place and none was given")
    else:
        associated = at.associated_data(type_)
        data = data[1:]
    key_id, nonce, body = (
        data[:_KEY_ID_BYTES],
        data[_KEY_ID_BYTES : _KEY_ID_BYTES + _NONCE_BYTES],
        data[_KEY_ID_BYTES + _NONCE_BYTES :],
    )
    aead = ring.get(key_id)
    if aead is None:
        raise CheckpointEncryptionError(
            f"{where} is encrypted under key id {key_id.hex()}, which is not among "
            "CHECKPOINTS_ENCRYPTION_KEYS"
        )
    from cryptography.exceptions import InvalidTag  # loaded with the keyring already

    try:
        plain = aead.decrypt(nonce, body, associated)
    except InvalidTag as exc:
        moved = " or was sealed for another place (moved, swapped or replayed)" if fmt == 2 else ""
        raise CheckpointEncryptionError(
            f"{where} failed authentication: it was tampered with or corrupted{moved}"
        ) from exc
    return type_[: -len(SUFFIX)], plain


def rebind(typed: tuple[str, bytes | None], old: Place, new: Place) -> tuple[str, bytes | None]:
    """A bound value sealed for ``old`` re-sealed for ``new`` (a copy's legitimate move);
    plaintext and unbound values are returned as they are."""
    if sealed_format(typed) != 2 or old == new:
        return typed
    return seal_typed(open_typed(typed, at=old), at=new)


def sealed_key_id(typed: tuple[str, bytes | None]) -> bytes | None:
    """The key id a stored pair is sealed under, None for plaintext."""
    fmt = sealed_format(typed)
    if fmt == 0:
        return None
    data = bytes(typed[1])
    return data[1 : 1 + _KEY_ID_BYTES] if fmt == 2 else data[:_KEY_ID_BYTES]
