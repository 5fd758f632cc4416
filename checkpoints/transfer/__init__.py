"""Threads in and out of the store: copy between savers, export to a file, import it back.

`copy_threads` is the one copy path (the management commands ``import_checkpoints`` and
``export_checkpoints`` call it and `export_threads`); `records` documents the file format.
"""

from checkpoints.transfer.copy import (
    TransferSummary,
    TransferVerifyError,
    copy_threads,
    export_threads,
    verify_thread,
)
from checkpoints.transfer.records import FORMAT_VERSION, TransferFormatError
from checkpoints.transfer.sources import FileSource, SaverSource, open_source

__all__ = [
    "FORMAT_VERSION",
    "FileSource",
    "SaverSource",
    "TransferFormatError",
    "TransferSummary",
    "TransferVerifyError",
    "copy_threads",
    "export_threads",
    "open_source",
    "verify_thread",
]
