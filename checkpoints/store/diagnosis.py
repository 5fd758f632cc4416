"""Why a database or Redis the settings name did not answer, and what fixes it.

The system checks, ``/health/``, the command line's short error messages and the store's own
refusals (a missing table) all read a failure through here, so one cause gets one piece of
advice everywhere: a wrong role is not answered "run migrate". Drivers only say what went
wrong in their message text (libpq's "FATAL:  role ... does not exist"), so that text is
read here, next to the savers that speak those protocols, and nowhere else.
"""

from __future__ import annotations

import dataclasses
import os
import re
from urllib.parse import urlsplit, urlunsplit

MASK = "***"


@dataclasses.dataclass(frozen=True)
class Diagnosis:
    """``cause`` a stable word (tests and callers branch on it), ``problem`` what is wrong,
    ``fix`` what to do, both in words an operator acts on."""

    cause: str
    problem: str
    fix: str

    @property
    def needs_migrate(self) -> bool:
        return self.cause == "tables"


def bound_connect_wait(seconds: int = 5) -> None:
    """Give up connecting to PostgreSQL after ``seconds`` in this process (libpq's
    PGCONNECT_TIMEOUT, unless the operator set it): without one, a check of a port where
    something else listens and never answers would wait forever."""
    os.environ.setdefault("PGCONNECT_TIMEOUT", str(seconds))


def mask_url(url: str) -> str:
    """``url`` with its password replaced by ``***``; anything unparsable is shown as is
    only up to its scheme (it may hold a password in a shape we cannot find)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url.split("://", 1)[0] + "://" + MASK
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{user}:{MASK}@{host}"))


def database_value(entry: dict) -> str:
    """A DATABASES entry as the URL an operator wrote (password masked), or a SQLite path."""
    if (entry.get("ENGINE") or "").endswith("sqlite3"):
        return str(entry.get("NAME"))
    user = entry.get("USER") or ""
    auth = f"{user}:{MASK}@" if entry.get("PASSWORD") else (f"{user}@" if user else "")
    host = entry.get("HOST") or "127.0.0.1"
    return f"postgres://{auth}{host}:{entry.get('PORT') or 5432}/{entry.get('NAME') or ''}"


def database_setting(alias: str) -> str:
    """The setting that names database ``alias``: the service fills ``default`` from
    DATABASE_URL, so an operator who set that variable reads its name."""
    if alias == "default" and os.environ.get("DATABASE_URL"):
        return "DATABASE_URL (DATABASES['default'])"
    return f"DATABASES[{alias!r}]"


def one_line(setting: str, value: str, diagnosis: Diagnosis) -> str:
    """The one line every check, probe and message prints for a failure."""
    return f"{setting} is {value}: {diagnosis.problem}; fix: {diagnosis.fix}."


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    while exc is not None and exc not in seen:
        seen.append(exc)
        exc = exc.__cause__ or exc.__context__
    return seen


def _text(exc: BaseException) -> str:
    return " ".join(str(e) for e in _chain(exc))


def _sqlstate(exc: BaseException) -> str | None:
    for link in _chain(exc):
        state = getattr(link, "sqlstate", None)
        if state:
            return state
    return None


def diagnose_database(exc: BaseException, entry: dict) -> Diagnosis:
    """What ``exc``, raised connecting to or reading from ``entry``'s database, means."""
    text = _text(exc)  # matched against: the driver's words may sit on a cause
    shown = _first_line(str(exc) or text)  # shown: the error's own first line
    state = _sqlstate(exc)
    host = entry.get("HOST") or "127.0.0.1"
    port = entry.get("PORT") or 5432
    name, user = entry.get("NAME"), entry.get("USER")
    if (entry.get("ENGINE") or "").endswith("sqlite3"):
        if "no such table" in text:
            return _missing_tables(shown)
        if "unable to open database file" in text:
            folder = os.path.dirname(str(name)) or "."
            return Diagnosis(
                "unreachable",
                f"the SQLite file cannot be opened (folder {folder} missing or not writable)",
                "create the folder, or set CHECKPOINTS_DATA_DIR (or DATABASE_URL) to a "
                "writable place",
            )
        if "readonly database" in text or "read-only" in text:
            return Diagnosis(
                "permission",
                "the SQLite file is read-only for this process",
                "make the file and its folder writable by the user running the service",
            )
        return Diagnosis("other", f"SQLite refused: {shown}", _generic_fix())
    if state == "42P01" or re.search(r'relation "[^"]+" does not exist', text):
        return _missing_tables(shown)
    if state == "42501" or "permission denied" in text:
        return Diagnosis(
            "permission",
            f"role {user!r} may not read the checkpoint tables ({shown})",
            f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {user}, "
            "or connect as the role that ran migrate",
        )
    if re.search(r'database "[^"]+" does not exist', text):
        return Diagnosis(
            "no_database",
            f"database {name!r} does not exist on {host}:{port}",
            f"create it (createdb -h {host} -p {port} {name}) or correct the name in the URL",
        )
    if re.search(r'role "[^"]+" does not exist', text):
        return Diagnosis(
            "role",
            f"role {user!r} does not exist on {host}:{port}",
            "correct the user in the URL, or create the role (CREATE ROLE ... LOGIN)",
        )
    if "password authentication failed" in text or "no password supplied" in text:
        return Diagnosis(
            "password",
            f"the server refused the password of role {user!r}",
            "correct the password in the URL (percent-encode : @ / in it)",
        )
    if "Connection refused" in text or "No such file or directory" in text:
        return Diagnosis(
            "unreachable",
            f"nothing accepts connections at {host}:{port}",
            "start PostgreSQL there, or correct the host and port in the URL",
        )
    if "resolve host" in text or "translate host name" in text or "Name or service" in text:
        return Diagnosis(
            "unreachable",
            f"host {host!r} is not known",
            "correct the host in the URL",
        )
    if "timeout" in text.lower() or "closed the connection unexpectedly" in text:
        return Diagnosis(
            "wrong_server",
            f"what listens at {host}:{port} did not answer as PostgreSQL",
            "correct the port in the URL (PostgreSQL listens on 5432 unless told otherwise)",
        )
    return Diagnosis("other", f"the database refused: {shown}", _generic_fix())


def _missing_tables(shown: str) -> Diagnosis:
    return Diagnosis(
        "tables",
        f"the checkpoint tables are missing ({shown})",
        "run `manage.py migrate`",
    )


def _generic_fix() -> str:
    return "correct the setting, or run with --traceback to see the driver's whole error"


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else "no message"
    # libpq prefixes what matters with the whole connection attempt.
    return re.sub(r"^connection failed: connection to server at [^:]+: ", "", line).strip()


def diagnose_redis(exc: BaseException, url: str) -> Diagnosis:
    """What ``exc``, raised talking to the Redis at ``url``, means."""
    text = _text(exc)
    shown = _first_line(str(exc) or text)
    try:
        parts = urlsplit(url)
        where = f"{parts.hostname or '127.0.0.1'}:{parts.port or 6379}"
    except ValueError:
        where = "the URL's host"
    if "DB index is out of range" in text:
        return Diagnosis(
            "redis_db",
            "the Redis database number is past the server's last one",
            "use a database number below the server's `databases` setting (16 unless set)",
        )
    if "NOAUTH" in text or "WRONGPASS" in text or "invalid password" in text:
        return Diagnosis(
            "password",
            "the Redis server refused the password (or wants one)",
            "put the right password in the URL: redis://:PASSWORD@host:port/db",
        )
    if "Connection refused" in text or "Error 111" in text:
        return Diagnosis(
            "unreachable",
            f"nothing accepts connections at {where}",
            "start Redis there, or correct the host and port in the URL",
        )
    if "Name or service not known" in text or "nodename nor servname" in text:
        return Diagnosis("unreachable", f"host {where} is not known", "correct the host")
    if "Connection closed by server" in text or "Protocol Error" in text:
        return Diagnosis(
            "wrong_server",
            f"what listens at {where} is not a Redis server",
            "correct the port in the URL (Redis listens on 6379 unless told otherwise)",
        )
    if "Timeout" in text or "timed out" in text:
        return Diagnosis(
            "wrong_server",
            f"what listens at {where} did not answer as Redis in time",
            "correct the host and port in the URL, or start Redis there",
        )
    return Diagnosis("other", f"Redis refused: {shown}", _generic_fix())
