"""Test settings: the project's, plus a PostgreSQL alias when the server answers."""

import os
import tempfile

os.environ.setdefault("CHECKPOINTS_DATA_DIR", tempfile.mkdtemp(prefix="checkpoint-store-tests-"))

from project.settings import *  # noqa: E402,F403
from project.settings import CHECKPOINTS, DATABASES  # noqa: E402

POSTGRES_URL = os.environ.get(
    "CHECKPOINTS_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/checkpoint_store"
)
# Per-run names, so two test runs on one machine (CI and a developer) never share state.
REDIS_TEST_URL = os.environ.get(
    "CHECKPOINTS_TEST_REDIS_URL", f"redis://127.0.0.1:6379/{2 + os.getpid() % 12}"
)


def _postgres_answers() -> str | None:
    """None when the server answers, else why not (shown as the skip reason)."""
    try:
        import psycopg

        from checkpoints.dburl import parse_database_url

        entry = parse_database_url(POSTGRES_URL)
        psycopg.connect(
            host=entry["HOST"],
            port=entry["PORT"] or 5432,
            user=entry["USER"] or None,
            dbname="postgres",
            connect_timeout=3,
        ).close()
        return None
    except Exception as exc:  # noqa: BLE001 - any failure means "not available"
        return f"PostgreSQL at {POSTGRES_URL} is not reachable: {exc}"


POSTGRES_UNAVAILABLE = _postgres_answers()
if POSTGRES_UNAVAILABLE is None:
    from checkpoints.dburl import parse_database_url

    DATABASES["pg"] = parse_database_url(POSTGRES_URL)
    DATABASES["pg"]["TEST"] = {"NAME": f"test_checkpoint_store_{os.getpid()}"}
    # The same test database through the private PgBouncer of tests/pgbouncer.py, which
    # sets the port when it starts (only tests that ask for it connect here).
    DATABASES["pgb"] = {**DATABASES["pg"], "HOST": "127.0.0.1", "TEST": {"MIRROR": "pg"}}

DATABASES["default"]["TEST"] = {
    "NAME": os.path.join(os.environ["CHECKPOINTS_DATA_DIR"], "test.sqlite3")
}
CACHES = {
    "default": {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": REDIS_TEST_URL,
        "OPTIONS": {"CLIENT_CLASS": "django_redis.client.DefaultClient"},
    }
}
CHECKPOINTS = {**CHECKPOINTS, "PROVIDER": "sqlite", "CONN_STRING": None}
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# The service's throttles would turn the suite's many sweeps and rollbacks into 429s; the
# throttle's own tests set rates (tests/test_production.py).
REST_FRAMEWORK = {**REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {}}  # noqa: F405
