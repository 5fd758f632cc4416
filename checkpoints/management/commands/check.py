"""Django's `check`, which from the command line also connects to what the settings name.

The connecting checks (checkpoints.checks, tag ``connections``) would cost every other
command a round trip to each database and Redis, and a command run by a test or a script
through ``call_command`` is in the middle of its own work; so they run when an operator types
`manage.py check` (or passes ``connect=True``), and ``--no-connect`` leaves them out.
"""

from __future__ import annotations

from django.core.management.commands.check import Command as DjangoCheck

from checkpoints.checks import connecting
from checkpoints.store.diagnosis import bound_connect_wait


class Command(DjangoCheck):
    help = DjangoCheck.help + " From the command line it also connects to each database, the "
    "checkpoint store and the cache the settings name (--no-connect to skip that)."

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument(
            "--no-connect",
            action="store_false",
            dest="connect",
            default=None,
            help="Do not connect to the databases, the store and the cache.",
        )

    def handle(self, *app_labels, **options):
        connect = options["connect"]
        if connect is None:
            connect = getattr(self, "_called_from_command_line", False)
        if connect:
            bound_connect_wait()
        with connecting(enabled=connect, deploy=options["deploy"]):
            return super().handle(*app_labels, **options)
