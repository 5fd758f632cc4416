"""Turn a database URL (postgres://..., sqlite:///path) into a Django DATABASES entry."""

from __future__ import annotations

from urllib.parse import quote

# Scheme -> the store provider a URL opens (`checkpoints.connect`).
# redis+cluster://host:port[,host:port...] is the Redis saver on a cluster.
SCHEMES = {
    "memory": "memory",
    "sqlite": "sqlite",
    "postgres": "postgres",
    "postgresql": "postgres",
    "pgsql": "postgres",
    "redis": "redis",
    "rediss": "redis",
    "unix": "redis",
    "redis+cluster": "redis",
    "rediss+cluster": "redis",
    "redis+sentinel": "redis",
    "rediss+sentinel": "redis",
}
# Provider -> the Django engine, for the providers whose store is a Django database.
ENGINES = {
    "postgres": "django.db.backends.postgresql",
    "sqlite": "django.db.backends.sqlite3",
}
# The schemes of a database URL: what `parse_database_url` reads.
DATABASE_SCHEMES = frozenset(s for s, provider in SCHEMES.items() if provider in ENGINES)


def parse_database_url(url: str) -> dict:
    """Parse ``url``; raises ValueError naming the URL when the scheme is unknown.

    dj-database-url reads the URL (Unix-socket hosts, IPv6, ``currentSchema``, the sqlite
    path forms); only the engines the store runs on are accepted, with or without a driver
    suffix (``postgres+psycopg://``), and a PostgreSQL URL without a database names
    ``postgres``, as libpq does for the postgres user.
    """
    if "://" not in url:
        raise ValueError(f"database URL {url!r} has no scheme (expected postgres:// or sqlite://)")
    given = url.split("://", 1)[0]
    scheme = given.split("+", 1)[0].lower()
    if scheme not in DATABASE_SCHEMES:
        raise ValueError(
            f"database URL {url!r} has scheme {given!r}; expected one of "
            + ", ".join(sorted(DATABASE_SCHEMES))
        )
    engine = ENGINES[SCHEMES[scheme]]
    # Imported here, not at the top: `from checkpoints import from_conn_string` on a worker
    # that installed only langgraph and httpx (the remote saver) passes through this module.
    import dj_database_url

    parsed = dj_database_url.parse(scheme + url[len(given) :])
    if scheme == "sqlite":
        return {"ENGINE": engine, "NAME": parsed["NAME"] or ":memory:"}
    return {
        "ENGINE": engine,
        "NAME": parsed["NAME"] or "postgres",
        "USER": parsed["USER"],
        "PASSWORD": parsed["PASSWORD"],
        "HOST": parsed["HOST"],
        "PORT": str(parsed["PORT"] or ""),
        "OPTIONS": parsed.get("OPTIONS", {}),
    }


def database_url(entry: dict) -> str:
    """The postgres:// URL of a PostgreSQL DATABASES entry (what `parse_database_url` reads),
    for a child process told its database through ``DATABASE_URL``."""
    user = quote(entry.get("USER") or "", safe="")
    auth = user + (f":{quote(entry['PASSWORD'], safe='')}" if entry.get("PASSWORD") else "")
    host = entry.get("HOST") or "127.0.0.1"
    if host.startswith("/"):
        host = quote(host, safe="")  # a Unix socket's directory
    elif ":" in host:
        host = f"[{host}]"  # IPv6
    return f"postgres://{auth}@{host}:{entry.get('PORT') or 5432}/{quote(entry['NAME'])}"
