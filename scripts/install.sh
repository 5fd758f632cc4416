#!/usr/bin/env bash
# Create the virtualenv and install the project (with the given extras) when pyproject.toml
# changed. VENV (default .venv), PYTHON (default python3) and PIN (an extra requirement, such
# as "django>=6.0,<6.1") make another one: CI's second leg.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-}"
venv="${VENV:-.venv}"
"${PYTHON:-python3}" -m venv "$venv" 2>/dev/null || [ -x "$venv/bin/python" ]
stamp="$venv/.installed${extras:+-$extras}"
want="$(sha256sum pyproject.toml | cut -d' ' -f1)${PIN:+ $PIN}"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  # First: the pip Python 3.11 ships (23.2) cannot resolve the OpenTelemetry pins.
  "$venv/bin/pip" install --quiet --upgrade pip >/dev/null 2>&1 \
    || echo "note: could not upgrade pip in $venv; an old pip may fail to resolve" >&2
  "$venv/bin/pip" install --quiet -e ".${extras:+[$extras]}" ${PIN:+"$PIN"}
  echo "$want" > "$stamp"
fi
