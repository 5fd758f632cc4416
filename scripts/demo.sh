#!/usr/bin/env bash
# Install, migrate, write demo threads with a real graph, print the admin login, serve.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
.venv/bin/python manage.py migrate --verbosity 0
.venv/bin/python manage.py seed_demo
exec .venv/bin/python manage.py runserver 127.0.0.1:8000
