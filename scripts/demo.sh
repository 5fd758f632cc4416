#!/usr/bin/env bash
# Install, migrate, write demo threads with a real graph, serve; then print, last and alone,
# the login, the API docs, how to get an API token and how to stop.
set -euo pipefail
cd "$(dirname "$0")/.."
port="${DEMO_PORT:-8000}"
base="http://127.0.0.1:${port}"
# Refuse before anything is installed or printed: a login printed for a port another
# server answers on would be a login that server rejects.
if ! [[ "$port" =~ ^[0-9]+$ ]] || (( port < 1 || port > 65535 )); then
  echo "DEMO_PORT must be a port number from 1 to 65535, got '${port}'" >&2
  exit 2
fi
if (exec 3<>"/dev/tcp/127.0.0.1/${port}") 2>/dev/null; then
  echo "port ${port} is taken: stop what listens there, or choose another port with" \
    "DEMO_PORT=<port> bash scripts/demo.sh" >&2
  exit 2
fi
venv="${VENV:-.venv}"
# Redis database 15 of the local server, not 0: the demo's cache keys (throttle and lockout
# counts) stay out of whatever else uses that server's default database. REDIS_URL changes it.
export REDIS_URL="${REDIS_URL:-redis://127.0.0.1:6379/15}"
data_dir="${CHECKPOINTS_DATA_DIR:-var}"
# The store's database as the banner names it, the password masked.
database="${DATABASE_URL:-SQLite file ${data_dir}/checkpoints.sqlite3}"
database="$(sed -E 's#(://[^:/@]*):[^@]*@#\1:***@#' <<<"$database")"
redis_shown="$(sed -E 's#(://[^:/@]*):[^@]*@#\1:***@#' <<<"$REDIS_URL")"
[ -n "${DEMO_SKIP_INSTALL:-}" ] || bash scripts/install.sh prod   # the tests set it
"$venv/bin/python" manage.py migrate --verbosity 0
seeded="$("$venv/bin/python" manage.py seed_demo --no-color "$@")"

"$venv/bin/python" manage.py runserver "127.0.0.1:${port}" &
server=$!
trap 'kill "$server" 2>/dev/null || true' EXIT INT TERM
for _ in $(seq 60); do
  "$venv/bin/python" -c "import urllib.request; urllib.request.urlopen('${base}/admin/login/', timeout=1)" \
    2>/dev/null && break
  kill -0 "$server" 2>/dev/null || { echo "the server did not start" >&2; exit 1; }
  sleep 0.5
done

cat <<TEXT

==============================================================================
 Checkpoint Store demo is running
   ${seeded//$'\n'/$'\n'   }
   Admin:     ${base}/admin/
   API docs:  ${base}/api/docs/
   API token: .venv/bin/python manage.py drf_create_token admin
              curl -H "Authorization: Token <key>" ${base}/api/threads/
   Services:  web server 127.0.0.1:${port} (DEMO_PORT to change)
              database  ${database} (DATABASE_URL to change)
              Redis     ${redis_shown}, the cache (REDIS_URL to change;
                        down, the demo still runs and counts limits in memory)
   Stop:      press Ctrl+C (or: kill ${server})
==============================================================================
TEXT
wait "$server"
