#!/usr/bin/env bash
# Install with the dev extras, make sure Debian's Chromium and PgBouncer are there, run the
# whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh dev
# Debian's Chromium drives the browser tests; Debian's PgBouncer fronts PostgreSQL in
# transaction-pooling mode for tests/test_pgbouncer.py (the tests start and stop their own).
missing=()
[ -x /usr/bin/chromium ] || missing+=(chromium)
[ -x /usr/sbin/pgbouncer ] || missing+=(pgbouncer)
if [ "${#missing[@]}" -gt 0 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}") >/dev/null
fi
export CHECKPOINTS_TEST_OUTPUT="${CHECKPOINTS_TEST_OUTPUT:-$PWD/test-output}"
exec .venv/bin/pytest "$@"
