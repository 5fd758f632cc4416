"""Settings of the fuzz tests' server subprocess: the project's, plus the stored-rows guard.

The database and provider come from the environment (``tests.fuzz_fixtures.start_pg_server``
points both at the PostgreSQL test database); request errors go to the server's log.
"""

from project.settings import *  # noqa: F403
from project.settings import MIDDLEWARE

# Outermost, so the fingerprint spans authentication and every other middleware too.
MIDDLEWARE = ["tests.fuzz_fixtures.StoredRowsGuard", *MIDDLEWARE]
# The test process creates the users with the test settings' fast hasher.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"django.request": {"handlers": ["console"], "level": "ERROR"}},
}
