"""App config for the retention policy and the sweep."""

from django.apps import AppConfig


class RetentionConfig(AppConfig):
    name = "retention"
    verbose_name = "Retention"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Here, not at the top: these read models, which Django loads after this module.
        from checkpoints.status import register_claim_source
        from checkpoints.threads import register_presence_check
        from checkpoints.transfer.extras import register_thread_extra
        from retention import checks  # noqa: F401  (registers the checks)
        from retention.filters import ParkClaims
        from retention.holds import HoldClaims
        from retention.runs import park_presence
        from retention.transfer import HoldsExtra, parks_among

        # A thread id a park names is taken: no fork or copy may land on it.
        register_presence_check("retention.parks", park_presence, among=parks_among)
        # The status rule shows what spares a thread from the sweep: holds and parks.
        register_claim_source(HoldClaims())
        register_claim_source(ParkClaims())
        # An export carries each thread's live hold, and an import places it again.
        register_thread_extra(HoldsExtra())
