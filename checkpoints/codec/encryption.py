"""Opt-in authenticated encryption (AES-256-GCM) of stored values, with rotating keys.

``CHECKPOINTS["ENCRYPTION_KEYS"]`` lists urlsafe-base64 32-byte keys: the first encrypts,
every one decrypts. A sealed value's type tag ends in ``+aesgcm`` and its bytes are
``key id (8) | nonce (12) | ciphertext+tag``; the type tag is authenticated with it, so a
row cannot be relabelled. With keys set, a plaintext row fails the read; without keys, a
sealed row fails the read naming the missing setting. Metadata is never encrypted.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from functools import lru_cache

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from checkpoints.conf import setting
from checkpoints.errors import CheckpointConfigError, CheckpointEncryptionError

SUFFIX = "+aesgcm"
_KEY_ID_BYTES = 8
_NONCE_BYTES = 12


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


def seal_typed(typed: tuple[str, bytes | None]) -> tuple[str, bytes | None]:
    """Encrypt a (type, bytes) pair under the first key; unchanged when encryption is off."""
    type_, data = typed
    current, _ = keyring()
    if current is None or data is None:
        return typed
    key_id, aead = current
    nonce = os.urandom(_NONCE_BYTES)
    sealed_type = type_ + SUFFIX
    return sealed_type, key_id + nonce + aead.encrypt(nonce, bytes(data), sealed_type.encode())


def open_typed(
    typed: tuple[str, bytes | None], *, where: str = "stored value"
) -> tuple[str, bytes]:
    """The plaintext (type, bytes) of a sealed pair; refuses plaintext when keys are set."""
    type_, data = typed
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
    try:
        plain = aead.decrypt(nonce, body, type_.encode())
    except InvalidTag as exc:
        raise CheckpointEncryptionError(
            f"{where} failed authentication: it was tampered with or corrupted"
        ) from exc
    return type_[: -len(SUFFIX)], plain


def sealed_key_id(typed: tuple[str, bytes | None]) -> bytes | None:
    """The key id a stored pair is sealed under, None for plaintext."""
    type_, data = typed
    if data is None or not type_.endswith(SUFFIX):
        return None
    return bytes(data[:_KEY_ID_BYTES])
