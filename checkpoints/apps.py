"""App config: refuse to boot on a wrong CHECKPOINTS configuration; tune SQLite connections."""

from django.apps import AppConfig
from django.core.exceptions import ImproperlyConfigured
from django.db.backends.signals import connection_created

from checkpoints import checks, graph_checks, signals  # noqa: F401  (registers checks, signals)
from checkpoints.store.sqlite.connection import tune_sqlite


class CheckpointsConfig(AppConfig):
    name = "checkpoints"
    verbose_name = "Checkpoints"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        connection_created.connect(tune_sqlite, dispatch_uid="checkpoints.tune_sqlite")

        errors = checks.configuration_errors()
        if errors:
            # A WSGI/ASGI boot never runs `manage.py check`, so refuse here too.
            raise ImproperlyConfigured(
                "Checkpoint store settings are wrong:\n"
                + "\n".join(f"- {e.msg} {e.hint or ''}".rstrip() for e in errors)
            )
