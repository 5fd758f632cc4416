"""Threads in and out of the store: copy between savers, export to a file, import it back.

`copy_threads` is the one copy path (the management commands ``import_checkpoints`` and
``export_checkpoints`` call it and `export_threads`); `records` documents the file format.
"""

from checkpoints.transfer.copy import TransferRefused, TransferSummary, copy_threads
from checkpoints.transfer.export import export_threads
from checkpoints.transfer.langgraph_tables import TableSource
from checkpoints.transfer.records import FORMAT_VERSION, TransferFormatError
from checkpoints.transfer.sources import FileSource, SaverSource, open_source, source_of
from checkpoints.transfer.verify import TransferVerifyError, verify_thread

__all__ = [
    "FORMAT_VERSION",
    "FileSource",
    "SaverSource",
    "TableSource",
    "TransferFormatError",
    "TransferRefused",
    "TransferSummary",
    "TransferVerifyError",
    "copy_threads",
    "export_threads",
    "open_source",
    "source_of",
    "verify_thread",
]
