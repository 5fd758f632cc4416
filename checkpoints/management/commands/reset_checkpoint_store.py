"""Empty the checkpoint store and record the current format generation."""

from django.core.management.base import BaseCommand, CommandError

from checkpoints.store.registry import get_saver


class Command(BaseCommand):
    help = (
        "Delete every checkpoint thread in the deployment's store (or --provider's) and record "
        "this version's format generation. Asks for confirmation unless --yes."
    )

    def add_arguments(self, parser):
        parser.add_argument("--yes", action="store_true", help="do not ask for confirmation")
        parser.add_argument("--provider", help="reset this provider's store instead")

    def handle(self, *args, yes: bool = False, provider: str | None = None, **options):
        # The point of a reset is a store the format check refuses: build past the check.
        saver = get_saver(provider, check_format=False)
        if not yes:
            answer = input(
                f"This deletes every checkpoint in the {saver.provider} store. "
                "Type 'yes' to go on: "
            )
            if answer.strip().lower() != "yes":
                raise CommandError("reset cancelled; nothing was deleted")
        deleted = saver.reset_store()
        self.stdout.write(
            self.style.SUCCESS(
                f"Reset the {saver.provider} checkpoint store: {deleted} thread(s) deleted, "
                "format generation recorded."
            )
        )
