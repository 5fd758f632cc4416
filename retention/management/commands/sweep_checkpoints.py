"""manage.py sweep_checkpoints: run the checkpoint sweep once."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from checkpoints import audit
from checkpoints.errors import CheckpointStoreError
from retention.sweep import sweep_checkpoints


class Command(BaseCommand):
    help = (
        "Delete checkpoint threads past their finished or waiting horizon, sparing the ones "
        "a live-thread filter claims."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--dry-run", action="store_true", help="Report what would go; delete nothing."
        )
        parser.add_argument(
            "--json", action="store_true", dest="as_json", help="Print the result as JSON."
        )

    def handle(self, *args, dry_run: bool = False, as_json: bool = False, **options):
        try:
            with audit.acting(origin="command", name="manage.py sweep_checkpoints"):
                result = sweep_checkpoints(dry_run=dry_run, triggered_by="command")
        except CheckpointStoreError as exc:
            raise CommandError(f"checkpoint sweep failed ({exc.code}): {exc}") from exc
        if as_json:
            self.stdout.write(json.dumps(result.as_dict(), indent=2))
            return
        self.stdout.write(summary(result, style=self.style))


def summary(result, *, style) -> str:
    """A readable report of one sweep, spared threads listed."""
    head = "Dry run on" if result.dry_run else "Swept"
    verb = "would delete" if result.dry_run else "deleted"
    lines = [
        style.SUCCESS(
            f"{head} the {result.provider} store (waiting {result.waiting_minutes} min, "
            f"finished {result.finished_minutes} min)"
        ),
        f"  {verb} {result.swept_count} thread(s): {result.finished_swept} finished, "
        f"{result.waiting_swept} waiting",
    ]
    if result.dry_run:
        lines.extend(_would_delete(result.deleted_ids))
    if result.skipped:
        lines.append(f"  waiting horizon skipped: {result.skipped}")
    lines.append(f"  spared {len(result.spared)} thread(s)")
    for entry in result.spared:
        lines.append(
            style.WARNING(
                f"    {entry['thread_id']}  horizon={entry['horizon']}  owner={entry['owner']}"
            )
        )
    return "\n".join(lines)


# A dry run over a large store names this many per horizon; --json names every one.
LISTED = 100


def _would_delete(deleted_ids: dict[str, list[str]]) -> list[str]:
    """The ids a dry run would delete, per horizon: what an operator checks before the
    real run."""
    lines = []
    for horizon, ids in deleted_ids.items():
        for thread_id in ids[:LISTED]:
            lines.append(f"    {thread_id}  horizon={horizon}")
        if len(ids) > LISTED:
            lines.append(f"    ... and {len(ids) - LISTED} more {horizon} (--json names all)")
    return lines
