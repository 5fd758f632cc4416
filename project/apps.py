"""The service's own app: wiring that belongs to this deployment, not to the reusable apps."""

from __future__ import annotations

from django.apps import AppConfig


class ServiceConfig(AppConfig):
    name = "project"
    label = "service"
    verbose_name = "Checkpoint Store service"

    def ready(self) -> None:
        from django_structlog import signals

        from project.logs import bind_thread_id

        signals.bind_extra_request_finished_metadata.connect(
            bind_thread_id, dispatch_uid="service-thread-id-finished"
        )
        signals.bind_extra_request_failed_metadata.connect(
            bind_thread_id, dispatch_uid="service-thread-id-failed"
        )
