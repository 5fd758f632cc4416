"""What the service's entrances (manage.py, asgi.py, wsgi.py) do around Django.

`prepare()` makes the data folder the embedded SQLite file lives in, at start rather than
when the settings are imported (importing them writes nothing). `explained()` turns a
settings or connection error into a few lines naming the variable and the fix, with no
traceback: the sentence that matters used to be the last of 17-52 lines. ``--traceback`` on
the command line, or DJANGO_DEBUG=1 set in the environment, lets the traceback through.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured
from django.db import OperationalError, ProgrammingError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from checkpoints.checks import static_manifest_message
from checkpoints.errors import CheckpointConfigError
from checkpoints.reachability import cache_findings, database_findings, store_findings
from checkpoints.store.diagnosis import bound_connect_wait

# Errors a wrong setting or a server that does not answer end in (OperationalError: cannot
# connect; ProgrammingError: a missing table, a role without rights); anything else, such as
# an IntegrityError, is a bug and keeps its traceback.
CONNECTION_ERRORS = (OperationalError, ProgrammingError, RedisConnectionError, RedisTimeoutError)
EXPLAINED = (ImproperlyConfigured, CheckpointConfigError, *CONNECTION_ERRORS)
WHERE = "(--traceback, or DJANGO_DEBUG=1, shows where it was raised)"


def prepare() -> None:
    """Make DATA_DIR when the embedded SQLite file is to live in it: a fresh clone has no
    var/ folder, and SQLite does not make one."""
    from django.conf import settings

    data_dir = getattr(settings, "DATA_DIR", None)
    name = settings.DATABASES.get("default", {}).get("NAME")
    if data_dir is not None and name and Path(str(name)).parent == Path(data_dir):
        Path(data_dir).mkdir(parents=True, exist_ok=True)


# How long a request waits for one of the pool's connections before it fails (a database
# that does not answer is then an error within this, not at once).
POOL_WAIT_SECONDS = 10


def pool_connections() -> None:
    """Give a server process Django's connection pool on a PostgreSQL default database, of
    ``DATABASE_POOL_SIZE`` (0: none); before any connection is made."""
    from django.conf import settings

    size = getattr(settings, "DATABASE_POOL_SIZE", 0)
    default = settings.DATABASES.get("default", {})
    if size and default.get("ENGINE", "").endswith("postgresql"):
        default.setdefault("OPTIONS", {})["pool"] = {
            "min_size": 0,
            "max_size": size,
            "timeout": POOL_WAIT_SECONDS,
        }


def announce() -> None:
    """Say at a server's start what the system checks would (gunicorn and uvicorn run none):
    a missing static manifest."""
    message = static_manifest_message()
    if message is not None:
        print(f"warning: {message}", file=sys.stderr)


def wants_traceback(argv: list[str] | None = None) -> bool:
    return "--traceback" in (argv or []) or os.environ.get("DJANGO_DEBUG") == "1"


def explain(exc: BaseException) -> list[str]:
    """The lines that say what is wrong and how to fix it."""
    if isinstance(exc, CheckpointConfigError):
        text = exc.message
    else:
        text = str(exc).strip() or type(exc).__name__
    if isinstance(exc, CONNECTION_ERRORS):
        text = text.splitlines()[0]  # the driver's hints follow; the findings say more
    lines = [f"{type(exc).__name__}: {text}"]
    if isinstance(exc, CONNECTION_ERRORS):
        # The driver's sentence names no setting: ask each server again, so the lines say
        # which setting points where, and the fix for the cause.
        bound_connect_wait()
        with contextlib.suppress(Exception):
            found = database_findings(close=True)
            if not found:
                found = store_findings(close=True) + cache_findings()
            if found:
                lines = [f"{type(exc).__name__}: {f.text}" for f in found]
    return lines


@contextlib.contextmanager
def explained(argv: list[str] | None = None, *, exit_code: int = 1):
    """Run the body; a configuration or connection error exits with a few lines."""
    try:
        yield
    except EXPLAINED as exc:
        if wants_traceback(argv):
            raise
        lines = explain(exc)
        # The hint rides on the last line, so the last line still names the variable.
        lines[-1] = f"{lines[-1]} {WHERE}"
        print("\n".join(lines), file=sys.stderr)
        raise SystemExit(exit_code) from None
