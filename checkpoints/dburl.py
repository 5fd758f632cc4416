"""Turn a database URL (postgres://..., sqlite:///path) into a Django DATABASES entry."""

from __future__ import annotations

import threading
from urllib.parse import parse_qs, quote, unquote, urlsplit

SCHEMES = {
    "postgres": "django.db.backends.postgresql",
    "postgresql": "django.db.backends.postgresql",
    "pgsql": "django.db.backends.postgresql",
    "sqlite": "django.db.backends.sqlite3",
}


def parse_database_url(url: str) -> dict:
    """Parse ``url``; raises ValueError naming the URL when the scheme is unknown."""
    if "://" not in url:
        raise ValueError(f"database URL {url!r} has no scheme (expected postgres:// or sqlite://)")
    parts = urlsplit(url)
    scheme = parts.scheme.split("+", 1)[0].lower()
    if scheme not in SCHEMES:
        raise ValueError(
            f"database URL {url!r} has scheme {parts.scheme!r}; expected one of "
            + ", ".join(sorted(SCHEMES))
        )
    if scheme == "sqlite":
        # sqlite:///relative.db and sqlite:////absolute/path.db, as dj-database-url reads them.
        path = url.split("://", 1)[1]
        path = path[1:] if path.startswith("/") else path
        return {"ENGINE": SCHEMES[scheme], "NAME": unquote(path) or ":memory:"}
    options = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    return {
        "ENGINE": SCHEMES[scheme],
        "NAME": unquote(parts.path.lstrip("/")) or "postgres",
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": parts.hostname or "",
        "PORT": str(parts.port or ""),
        "OPTIONS": options,
    }


def database_url(entry: dict) -> str:
    """The postgres:// URL of a PostgreSQL DATABASES entry (what `parse_database_url` reads),
    for a child process told its database through ``DATABASE_URL``."""
    user = quote(entry.get("USER") or "", safe="")
    auth = user + (f":{quote(entry['PASSWORD'], safe='')}" if entry.get("PASSWORD") else "")
    host = entry.get("HOST") or "127.0.0.1"
    return f"postgres://{auth}@{host}:{entry.get('PORT') or 5432}/{quote(entry['NAME'])}"


_alias_lock = threading.Lock()


def alias_for_conn_string(conn_string: str) -> str:
    """The Django database alias for a connection string: the configured database it names,
    else one registered for it on first use. The one rule, `checkpoints.connect`'s."""
    from checkpoints.connect import database_alias
    from checkpoints.errors import CheckpointConfigError

    with _alias_lock:
        try:
            return database_alias(conn_string)[0]
        except ValueError as exc:
            raise CheckpointConfigError(
                f"LLM_PROVIDER_CHECKPOINT_CONN_STRING: {exc}", field="conn_string"
            ) from exc
