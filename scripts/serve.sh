#!/usr/bin/env bash
# Production: install the service with its server (the `prod` extra), migrate, collect the
# static files WhiteNoise serves, then run gunicorn with uvicorn workers (ASGI, so the async
# savers run on the event loop) on 127.0.0.1:${PORT:-8000}. Every setting comes from the
# environment (README, "Production"); DJANGO_DEBUG defaults to 0 here, so the settings refuse
# to start without DJANGO_SECRET_KEY and DJANGO_ALLOWED_HOSTS.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${VENV:-.venv}"
[ -n "${SERVE_SKIP_INSTALL:-}" ] || bash scripts/install.sh prod   # the tests set it
export DJANGO_SETTINGS_MODULE="${DJANGO_SETTINGS_MODULE:-project.settings}"
export DJANGO_DEBUG="${DJANGO_DEBUG:-0}"
"$venv/bin/python" manage.py migrate --no-input --verbosity 0
"$venv/bin/python" manage.py collectstatic --no-input --verbosity 0
# Request lines come from django-structlog as JSON; gunicorn's own access log would repeat them.
# Only a proxy named in FORWARDED_ALLOW_IPS (addresses or networks, comma-separated) may say who
# the client is with X-Forwarded-For / X-Forwarded-Proto. None by default: a client's own header
# must not choose the address that sign-in lockouts, token limits and /metrics go by. Behind a
# proxy on this host set FORWARDED_ALLOW_IPS=127.0.0.1, else every client has the proxy's.
exec "$venv/bin/gunicorn" project.asgi:application \
  --worker-class uvicorn_worker.UvicornWorker \
  --bind "127.0.0.1:${PORT:-8000}" \
  --forwarded-allow-ips "${FORWARDED_ALLOW_IPS:-}" \
  --workers "${WEB_CONCURRENCY:-2}" \
  --timeout "${GUNICORN_TIMEOUT:-60}" \
  --graceful-timeout 30
