"""WSGI entry point."""

import os

from django.core.wsgi import get_wsgi_application

from project.otel import setup as setup_tracing  # noqa: E402

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
setup_tracing()  # before the app loads, so Django's middleware is instrumented
application = get_wsgi_application()
