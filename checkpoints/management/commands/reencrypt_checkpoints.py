"""Seal every stored channel value and pending write under the current encryption key."""

from django.core.management.base import BaseCommand, CommandError

from checkpoints.errors import CheckpointStoreError
from checkpoints.store.registry import get_saver, orm_saver


class Command(BaseCommand):
    help = (
        "Rewrite channel values and pending writes under the first CHECKPOINTS_ENCRYPTION_KEYS "
        "key, bound to their place, in batches; safe to interrupt, re-run, and run beside writers."
    )

    def add_arguments(self, parser):
        parser.add_argument("--batch-size", type=int, default=500)
        parser.add_argument("--database", default="default")
        parser.add_argument(
            "--redis-url", default=None, help="rewrite this Redis store instead of a database"
        )

    def handle(self, *args, batch_size: int, database: str, redis_url: str | None, **options):
        if batch_size < 1:
            raise CommandError(f"--batch-size must be at least 1, got {batch_size}")
        try:
            if redis_url:
                saver = get_saver("redis", conn_string=redis_url)
            else:
                saver = orm_saver(database)
            result = saver.reseal(batch_size=batch_size)
        except CheckpointStoreError as exc:
            raise CommandError(exc.message) from exc
        raced = f"; {result.raced} changed by a writer meanwhile, kept" if result.raced else ""
        self.stdout.write(
            self.style.SUCCESS(
                f"Examined {result.examined} stored value(s); rewrote {result.rewritten} "
                f"under the current key, bound to their place{raced}."
            )
        )
