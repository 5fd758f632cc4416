"""Import threads into the deployment's store: from LangGraph's savers, ours, or an export."""

import sys

from django.core.management.base import BaseCommand, CommandError

from checkpoints.errors import CheckpointStoreError
from checkpoints.store.registry import get_saver
from checkpoints.transfer import TransferRefused, copy_threads, open_source
from checkpoints.transfer.records import DEFAULT_MAX_IMPORT_BYTES


class Command(BaseCommand):
    help = (
        "Import checkpoint threads into the configured store from SOURCE: "
        "langgraph+postgresql://..., langgraph+sqlite:///PATH, langgraph+redis://..., "
        "another store of ours (sqlite:///, postgresql://, redis://), an export file "
        "(.jsonl, .jsonl.zst), or --saver module:callable. Each thread is checked, then "
        "imported whole or not at all; threads already there are skipped. A refused thread "
        "is named and the command exits non-zero; --strict imports nothing then."
    )

    def add_arguments(self, parser):
        parser.add_argument("source", nargs="?", help="where to read threads from")
        parser.add_argument("--saver", help="module:callable returning a BaseCheckpointSaver")
        parser.add_argument("--thread", action="append", dest="threads", metavar="ID")
        parser.add_argument("--on-conflict", choices=("skip", "fail"), default="skip")
        parser.add_argument(
            "--owner", default="", help="owner of threads whose source records no owner"
        )
        parser.add_argument(
            "--owner-from-metadata",
            default="",
            metavar="KEY",
            help="take the owner of threads whose source records none from this metadata key",
        )
        parser.add_argument(
            "--strict", action="store_true", help="import nothing if any thread is refused"
        )
        parser.add_argument(
            "--max-bytes",
            type=int,
            default=DEFAULT_MAX_IMPORT_BYTES,
            metavar="N",
            help=f"most bytes an export file may hold decompressed ({DEFAULT_MAX_IMPORT_BYTES})",
        )
        parser.add_argument(
            "--trust-source",
            action="store_true",
            help="read langgraph+redis://, whose own serializer revives what its rows name",
        )
        parser.add_argument("--verify", action="store_true", help="compare each thread after")
        parser.add_argument("--dry-run", action="store_true", help="read and check, write nothing")

    def handle(self, *args, source=None, saver=None, threads=None, **options):
        if options["max_bytes"] < 1:
            raise CommandError(f"--max-bytes {options['max_bytes']} must be at least 1")
        progress = _progress(self.stderr) if sys.stderr.isatty() else None
        try:
            target = get_saver()
            with open_source(
                source,
                saver=saver,
                max_bytes=options["max_bytes"],
                trust_source=options["trust_source"],
            ) as src:
                summary = copy_threads(
                    src,
                    target,
                    thread_ids=threads,
                    on_conflict=options["on_conflict"],
                    verify=options["verify"],
                    owner=options["owner"],
                    owner_from_metadata=options["owner_from_metadata"],
                    strict=options["strict"],
                    dry_run=options["dry_run"],
                    progress=progress,
                )
        except TransferRefused as exc:
            self._refusals(exc.summary.refusals, progress)
            raise CommandError(
                f"{exc.summary.refused} thread(s) refused (see above); --strict: nothing "
                "was imported"
            ) from exc
        except CheckpointStoreError as exc:
            raise CommandError(exc.message) from exc
        self._refusals(summary.refusals, progress)
        verb = "Would import" if options["dry_run"] else "Imported"
        self.stdout.write(f"{verb} {summary}")
        if summary.refused:
            raise CommandError(f"{summary.refused} thread(s) refused; see above")

    def _refusals(self, refusals, progress) -> None:
        if progress is not None:
            self.stderr.write("")
        for refusal in refusals:
            self.stderr.write(f"refused: {refusal}")


def _progress(stream):
    def show(summary):
        stream.write(
            f"\r{summary.threads} thread(s), {summary.checkpoints} checkpoint(s)", ending=""
        )
        stream.flush()

    return show
