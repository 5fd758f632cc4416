#!/usr/bin/env bash
# Debian's Chromium drives the browser tests; Debian's PgBouncer fronts PostgreSQL in
# transaction-pooling mode for tests/checkpoints/store/test_pgbouncer.py (the tests start and
# stop their own). Installed when missing and this runs as root with apt-get at hand.
set -euo pipefail
missing=()
[ -x /usr/bin/chromium ] || missing+=(chromium)
[ -x /usr/sbin/pgbouncer ] || missing+=(pgbouncer)
if [ "${#missing[@]}" -gt 0 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}") >/dev/null
fi
