"""Import threads into the deployment's store: from LangGraph's savers, ours, or an export."""

import time
from datetime import timedelta

from django.core.management.base import BaseCommand, CommandError

from checkpoints.errors import CheckpointStoreError
from checkpoints.store.registry import get_saver
from checkpoints.transfer import TransferRefused, copy_threads, open_source
from checkpoints.transfer.parallel import copy_parallel
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
        parser.add_argument(
            "--keep-source-times",
            action="store_true",
            help="keep each thread's created and last-write times from its checkpoints' ts "
            "(default: the import restarts every thread's retention clock)",
        )
        parser.add_argument(
            "--thread-metadata",
            default="",
            metavar="KEY,KEY",
            help="lift these checkpoint metadata keys into the thread metadata the threads "
            "API searches (the newest checkpoint holding each gives its value)",
        )
        parser.add_argument(
            "--jobs",
            type=int,
            default=1,
            metavar="N",
            help="import in N processes, threads shared out in batches (default 1)",
        )
        parser.add_argument("--verify", action="store_true", help="compare each thread after")
        parser.add_argument("--dry-run", action="store_true", help="read and check, write nothing")

    def handle(self, *args, source=None, saver=None, threads=None, **options):
        if options["max_bytes"] < 1:
            raise CommandError(f"--max-bytes {options['max_bytes']} must be at least 1")
        if options["jobs"] < 1:
            raise CommandError(f"--jobs {options['jobs']} must be at least 1")
        progress = _progress(self.stderr)

        def opened():
            return open_source(
                source,
                saver=saver,
                max_bytes=options["max_bytes"],
                trust_source=options["trust_source"],
            )

        shared = {
            "thread_ids": threads,
            "on_conflict": options["on_conflict"],
            "verify": options["verify"],
            "owner": options["owner"],
            "owner_from_metadata": options["owner_from_metadata"],
            "strict": options["strict"],
            "dry_run": options["dry_run"],
            "progress": progress,
            "keep_source_times": options["keep_source_times"],
            "thread_metadata": _keys(options["thread_metadata"]),
        }
        try:
            target = get_saver()
            if options["jobs"] > 1:
                summary = copy_parallel(opened, target, jobs=options["jobs"], **shared)
            else:
                with opened() as src:
                    if threads is None and hasattr(src, "count_threads"):
                        progress.total = src.count_threads()
                    summary = copy_threads(src, target, **shared)
        except TransferRefused as exc:
            progress.end()
            self._refusals(exc.summary.refusals)
            raise CommandError(
                f"{exc.summary.refused} thread(s) refused (see above); --strict: nothing "
                "was imported"
            ) from exc
        except CheckpointStoreError as exc:
            progress.end()
            raise CommandError(exc.message) from exc
        progress.end()
        self._refusals(summary.refusals)
        verb = "Would import" if options["dry_run"] else "Imported"
        self.stdout.write(f"{verb} {summary}")
        self.stdout.write(summary.clock())
        if summary.refused:
            raise CommandError(f"{summary.refused} thread(s) refused; see above")

    def _refusals(self, refusals) -> None:
        for refusal in refusals:
            self.stderr.write(f"refused: {refusal}")


def _keys(text: str) -> list[str]:
    keys = [key.strip() for key in text.split(",")]
    if text and not all(keys):
        raise CommandError(f"--thread-metadata {text!r} must name keys separated by commas")
    return [key for key in keys if key]


class Progress:
    """Progress on stderr: on a terminal a bar redrawn in place, with threads/s and the time
    left; elsewhere (a log, a pipe) a plain line every `PLAIN_EVERY` seconds. ``total``:
    the threads to go through, when the source can tell (no bar or estimate otherwise)."""

    PLAIN_EVERY = 10.0
    WIDTH = 24

    def __init__(self, stream, *, tty: bool) -> None:
        self.stream, self.tty = stream, tty
        self.total: int | None = None
        self.started = time.monotonic()
        self.shown_at = self.started
        self.drawn = False

    def __call__(self, summary) -> None:
        now = time.monotonic()
        if not self.tty and now - self.shown_at < self.PLAIN_EVERY:
            return
        self.shown_at = now
        total = summary.total if summary.total is not None else self.total
        done = summary.threads + summary.skipped + summary.refused
        rate = done / max(now - self.started, 1e-9)
        parts = [f"{done:,}" + (f"/{total:,}" if total else "") + " threads"]
        parts.append(f"{summary.checkpoints:,} checkpoints")
        parts.append(f"{rate:,.0f} threads/s")
        if total and rate > 0:
            left = max(total - done, 0) / rate
            parts.append(f"ETA {timedelta(seconds=round(left))}")
        text = "  ".join(parts)
        if self.tty:
            if total:
                filled = min(self.WIDTH, self.WIDTH * done // total)
                text = f"[{'#' * filled}{'.' * (self.WIDTH - filled)}] {text}"
            self.stream.write(f"\r{text}\x1b[K", ending="")
            self.stream.flush()
            self.drawn = True
        else:
            self.stream.write(f"progress: {text}")

    def end(self) -> None:
        """End the bar's line, so what follows starts on its own."""
        if self.drawn:
            self.stream.write("")
            self.drawn = False


def _progress(stream) -> Progress:
    out = getattr(stream, "_out", stream)
    return Progress(stream, tty=bool(getattr(out, "isatty", lambda: False)()))
