"""The faithful JSON codec, compression and encryption of stored values, and their rendering.

``json`` holds the codec (its writer and reader in ``writer`` and ``reader``), ``exception``
the record stored exceptions come back as, ``compression`` and ``encryption`` what every
saver applies to stored bytes, and ``render`` the one way admin and API show stored values.
"""

from checkpoints.codec.compression import ZSTD_SUFFIX, compress_typed, decompress_typed
from checkpoints.codec.envelope import ENVELOPE_KEY
from checkpoints.codec.exception import CheckpointedException
from checkpoints.codec.json import JSON_TYPE, FaithfulJSONCodec

__all__ = [
    "ENVELOPE_KEY",
    "JSON_TYPE",
    "ZSTD_SUFFIX",
    "CheckpointedException",
    "FaithfulJSONCodec",
    "compress_typed",
    "decompress_typed",
]
