"""Settings of the fuzz tests' server subprocess: the project's, plus the stored-rows guard.

The database and provider come from the environment (``tests.fuzz_fixtures.start_pg_server``
points both at the PostgreSQL test database); request errors go to the server's log.
"""

from project.settings import *  # noqa: F403
from project.settings import MIDDLEWARE, REST_FRAMEWORK

# Outermost, so the fingerprint spans authentication and every other middleware too.
MIDDLEWARE = ["tests.fuzz_fixtures.StoredRowsGuard", *MIDDLEWARE]
# The test process creates the users with the test settings' fast hasher.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# The fuzzer's many destructive calls must reach the store, not the throttle.
REST_FRAMEWORK = {**REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {}}
# DEBUG is off but nothing ran collectstatic: the admin's pages name unhashed files.
STORAGES = {
    **STORAGES,  # noqa: F405
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"django.request": {"handlers": ["console"], "level": "ERROR"}},
}
