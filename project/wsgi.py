"""WSGI entry point."""

import os

from django.core.wsgi import get_wsgi_application

from project.otel import setup as setup_tracing  # noqa: E402
from project.startup import announce, explained, pool_connections, prepare

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
setup_tracing()  # before the app loads, so Django's middleware is instrumented
# Exit code 3 is gunicorn's "worker failed to boot": the arbiter stops instead of restarting
# a worker that will fail the same way.
with explained(exit_code=3):
    prepare()
    pool_connections()
    application = get_wsgi_application()
    announce()
