"""Export threads of the deployment's store (or SOURCE) to the documented JSONL format."""

import os
from contextlib import nullcontext
from datetime import UTC, datetime

from django.core.management.base import BaseCommand, CommandError

from checkpoints.errors import CheckpointStoreError
from checkpoints.management.commands.import_checkpoints import _progress
from checkpoints.store.registry import get_saver
from checkpoints.transfer import SaverSource, export_threads, open_source
from checkpoints.transfer.records import open_output


class Command(BaseCommand):
    help = (
        "Write checkpoint threads to --output (a path, zstd when it ends in .zst, or - for "
        "stdout): one JSON record a line, after a header naming the format version."
    )

    def add_arguments(self, parser):
        parser.add_argument("--output", required=True, help="PATH, PATH.zst or -")
        parser.add_argument("--thread", action="append", dest="threads", metavar="ID")
        parser.add_argument("--since", help="only threads with a checkpoint at or after (ISO)")
        parser.add_argument("--source", help="export this SOURCE instead of the store")

    def handle(self, *args, output, threads=None, since=None, source=None, **options):
        when = None
        if since:
            try:
                when = datetime.fromisoformat(since)
            except ValueError as exc:
                raise CommandError(f"--since {since!r} is not an ISO date or time") from exc
            if when.tzinfo is None:
                when = when.replace(tzinfo=UTC)
        if output != "-":
            folder = os.path.dirname(os.path.abspath(output))
            if not os.path.isdir(folder):
                raise CommandError(f"--output {output!r}: the folder {folder!r} does not exist")
        # With the export on stdout, the terminal shows its bytes: no bar drawn over them.
        progress = _progress(self.stderr) if output != "-" else None
        try:
            with _source(source) as src, _output(output, self.stdout) as stream:
                summary = export_threads(
                    src, stream, thread_ids=threads, since=when, progress=progress
                )
        except CheckpointStoreError as exc:
            raise CommandError(exc.message) from exc
        if progress is not None:
            progress.end()
        for refusal in summary.refusals:
            self.stderr.write(f"refused: {refusal}")
        (self.stderr if output == "-" else self.stdout).write(f"Exported {summary}")
        if summary.refused:
            raise CommandError(f"{summary.refused} thread(s) not exported; see above")


def _output(output, stdout):
    try:
        return open_output(output, stdout)
    except OSError as exc:  # a folder, no permission, a full disk: named, no traceback
        raise CommandError(f"--output {output!r} cannot be written: {exc.strerror}") from exc


def _source(source):
    if source:
        return open_source(source)
    # The deployment's own store: its threads' metadata and holds go with them.
    return nullcontext(SaverSource(get_saver(), extras=True))
