#!/usr/bin/env bash
# Install with the dev extras, make sure Debian's Chromium is there, run the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh dev
if [ ! -x /usr/bin/chromium ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null
fi
export CHECKPOINTS_TEST_OUTPUT="${CHECKPOINTS_TEST_OUTPUT:-$PWD/test-output}"
exec .venv/bin/pytest "$@"
