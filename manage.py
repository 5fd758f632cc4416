#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    # Imported here, not at the top: project.startup reads Django's settings machinery, which
    # needs DJANGO_SETTINGS_MODULE set first.
    from django.core.management import execute_from_command_line

    from project.startup import explained, prepare

    with explained(sys.argv):
        prepare()
        execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
