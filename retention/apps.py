"""App config for the retention policy and the sweep."""

from django.apps import AppConfig


class RetentionConfig(AppConfig):
    name = "retention"
    verbose_name = "Retention"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from retention import checks  # noqa: F401  (registers the checks)
