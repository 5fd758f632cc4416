#!/usr/bin/env bash
# Install with the dev extras, make sure Debian's Chromium and PgBouncer are there, run the
# whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh dev
bash scripts/test-deps.sh
export CHECKPOINTS_TEST_OUTPUT="${CHECKPOINTS_TEST_OUTPUT:-$PWD/test-output}"
exec .venv/bin/pytest "$@"
