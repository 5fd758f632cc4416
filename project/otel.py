"""Tracing for the service when the ``otel`` extra is installed; nothing without it.

`setup()` (called by the WSGI/ASGI entry points and the Celery app) instruments Django,
psycopg, Redis and Celery, and sends spans where the standard variables say:
``OTEL_TRACES_EXPORTER=otlp`` (with ``OTEL_EXPORTER_OTLP_ENDPOINT``) or ``console``. Unset
or ``none`` instruments nothing and sets no provider: the store's own spans then go to
whatever provider the process sets (none: the API's no-op spans).
"""

from __future__ import annotations

import os

_done = False


def setup() -> bool:
    """Instrument once per process; False when OpenTelemetry is not installed."""
    global _done
    from checkpoints import tracing

    if not tracing.INSTALLED:
        return False
    if _done:
        return True
    _done = True
    exporter = os.environ.get("OTEL_TRACES_EXPORTER", "none").strip().lower()
    if exporter in ("", "none"):
        # Nothing would receive the spans; and the WSGI instrumentation answers 500 to a
        # path outside latin-1 (it quotes PATH_INFO as latin-1), so it stays off until used.
        return True
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

    if exporter == "otlp":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        span_exporter = OTLPSpanExporter()
    elif exporter == "console":
        span_exporter = ConsoleSpanExporter()
    else:
        raise ValueError(f"OTEL_TRACES_EXPORTER must be otlp, console or none, not {exporter!r}")
    name = os.environ.get("OTEL_SERVICE_NAME", "checkpoint-store")
    provider = TracerProvider(resource=Resource.create({"service.name": name}))
    provider.add_span_processor(BatchSpanProcessor(span_exporter))
    trace.set_tracer_provider(provider)
    from opentelemetry.instrumentation.celery import CeleryInstrumentor
    from opentelemetry.instrumentation.django import DjangoInstrumentor
    from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor
    from opentelemetry.instrumentation.redis import RedisInstrumentor

    DjangoInstrumentor().instrument()
    PsycopgInstrumentor().instrument(enable_commenter=False)
    RedisInstrumentor().instrument()
    CeleryInstrumentor().instrument()
    return True
