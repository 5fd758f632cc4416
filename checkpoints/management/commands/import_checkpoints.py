"""Import threads into the deployment's store: from LangGraph's savers, ours, or an export."""

import sys

from django.core.management.base import BaseCommand, CommandError

from checkpoints.errors import CheckpointStoreError
from checkpoints.store.registry import get_saver
from checkpoints.transfer import copy_threads, open_source


class Command(BaseCommand):
    help = (
        "Import checkpoint threads into the configured store from SOURCE: "
        "langgraph+postgresql://..., langgraph+sqlite:///PATH, langgraph+redis://..., "
        "another store of ours (sqlite:///, postgresql://, redis://), an export file "
        "(.jsonl, .jsonl.zst), or --saver module:callable. Each thread is imported whole "
        "or not at all; threads already there are skipped."
    )

    def add_arguments(self, parser):
        parser.add_argument("source", nargs="?", help="where to read threads from")
        parser.add_argument("--saver", help="module:callable returning a BaseCheckpointSaver")
        parser.add_argument("--thread", action="append", dest="threads", metavar="ID")
        parser.add_argument("--on-conflict", choices=("skip", "fail"), default="skip")
        parser.add_argument("--owner", default="", help="owner of threads naming no user_id")
        parser.add_argument("--verify", action="store_true", help="compare each thread after")
        parser.add_argument("--dry-run", action="store_true", help="read and check, write nothing")

    def handle(self, *args, source=None, saver=None, threads=None, **options):
        progress = _progress(self.stderr) if sys.stderr.isatty() else None
        try:
            target = get_saver()
            with open_source(source, saver=saver) as src:
                summary = copy_threads(
                    src,
                    target,
                    thread_ids=threads,
                    on_conflict=options["on_conflict"],
                    verify=options["verify"],
                    owner=options["owner"],
                    dry_run=options["dry_run"],
                    progress=progress,
                )
        except CheckpointStoreError as exc:
            raise CommandError(exc.message) from exc
        if progress is not None:
            self.stderr.write("")
        for refusal in summary.refusals:
            self.stderr.write(f"refused: {refusal}")
        verb = "Would import" if options["dry_run"] else "Imported"
        self.stdout.write(f"{verb} {summary}")
        if summary.refused:
            raise CommandError(f"{summary.refused} thread(s) refused; see above")


def _progress(stream):
    def show(summary):
        stream.write(
            f"\r{summary.threads} thread(s), {summary.checkpoints} checkpoint(s)", ending=""
        )
        stream.flush()

    return show
