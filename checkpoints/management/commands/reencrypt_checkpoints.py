"""Seal every stored channel value and pending write under the current encryption key."""

from django.core.management.base import BaseCommand, CommandError

from checkpoints.errors import CheckpointStoreError
from checkpoints.reencrypt import reencrypt_rows


class Command(BaseCommand):
    help = (
        "Rewrite channel values and pending writes under the first CHECKPOINTS_ENCRYPTION_KEYS "
        "key, in batches; safe to interrupt and run again."
    )

    def add_arguments(self, parser):
        parser.add_argument("--batch-size", type=int, default=500)
        parser.add_argument("--database", default="default")

    def handle(self, *args, batch_size: int, database: str, **options):
        if batch_size < 1:
            raise CommandError(f"--batch-size must be at least 1, got {batch_size}")
        try:
            result = reencrypt_rows(using=database, batch_size=batch_size)
        except CheckpointStoreError as exc:
            raise CommandError(exc.message) from exc
        self.stdout.write(
            self.style.SUCCESS(
                f"Examined {result.examined} stored value(s); rewrote {result.rewritten} "
                "under the current key."
            )
        )
