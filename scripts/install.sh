#!/usr/bin/env bash
# Create .venv and install the project (with the given extras) when pyproject.toml changed.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-}"
python3 -m venv .venv 2>/dev/null || [ -x .venv/bin/python ]
stamp=".venv/.installed${extras:+-$extras}"
want="$(sha256sum pyproject.toml | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  .venv/bin/pip install --quiet --upgrade pip >/dev/null 2>&1 || true
  .venv/bin/pip install --quiet -e ".${extras:+[$extras]}"
  echo "$want" > "$stamp"
fi
