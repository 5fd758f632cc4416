"""Shared pieces of the fuzz tests: the stored-rows fingerprint and a live server on PostgreSQL.

``fingerprint`` hashes every table a request could change (the store, marks, parks, the
sweep's history, the audit trail, the admin log), so "nothing stored changed" is one
comparison. The API fuzz reads it through ``StoredRowsGuard`` (installed only by
``tests.fuzz_settings``), which marks a 4xx answer that changed rows; the admin fuzz calls
it around each post.

``pg_server`` runs the project (``manage.py runserver``) in a subprocess whose Django
database AND checkpoint provider are the PostgreSQL test database (alias ``pg``), seeded
through that alias by the test process.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connections

ROOT = Path(__file__).resolve().parents[1]
SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")
CHANGED_HEADER = "X-Fuzz-Stored-Changed"
# Every table a request may write, by model label. Sessions, tokens and users are left out:
# logging in changes them by design.
STORED_MODELS = (
    "checkpoints.Thread",
    "checkpoints.Checkpoint",
    "checkpoints.ChannelBlob",
    "checkpoints.PendingWrite",
    "checkpoints.FinishedMark",
    "checkpoints.StoreFormat",
    "checkpoints.AuditEvent",
    "checkpoints.StoreLease",
    "retention.Park",
    "retention.SweepRun",
    "retention.SparedThread",
    "admin.LogEntry",
)


def _fingerprint_sql() -> str:
    from django.apps import apps

    parts = []
    for label in STORED_MODELS:
        table = apps.get_model(label)._meta.db_table
        # A row's xmin is the transaction that wrote this version of it: any insert, update
        # or delete changes the (id, xmin) list, and no stored value is read (blobs stay
        # in TOAST), so this stays cheap as checkpoints pile up during a fuzz run.
        parts.append(
            f"SELECT '{table}', count(*), coalesce(max(t.id), 0), "
            f"coalesce(md5(string_agg(t.id::text || ':' || t.xmin::text, ',' ORDER BY t.id)), '')"
            f' FROM "{table}" t'
        )
    return " UNION ALL ".join(parts)


def fingerprint(using: str = "default") -> dict[str, tuple]:
    """table -> (rows, max id, hash of every row version) on PostgreSQL, in one query."""
    connection = connections[using]
    if connection.vendor != "postgresql":
        raise RuntimeError(f"the fingerprint reads PostgreSQL; {using!r} is {connection.vendor}")
    with connection.cursor() as cursor:
        cursor.execute(_fingerprint_sql())
        return {table: (count, top, digest) for table, count, top, digest in cursor.fetchall()}


def changed_tables(before: dict[str, tuple], after: dict[str, tuple]) -> list[str]:
    return sorted(table for table in before if before[table] != after.get(table))


def count_request(request, status: int) -> None:
    """One line per request in ``$FUZZ_REQUESTS_FILE``: method, route pattern, status."""
    path = os.environ.get("FUZZ_REQUESTS_FILE")
    if not path:
        return
    match = getattr(request, "resolver_match", None)
    route = match.route if match is not None else "(no route)"
    with open(path, "a") as out:
        out.write(f"{request.method}\t{route}\t{status}\n")


class StoredRowsGuard:
    """Middleware (fuzz settings only): a 4xx that changed stored rows says so in a header.

    The server answers one request at a time (``--nothreading``), so the difference between
    the fingerprints before and after is this request's doing. Each such answer is also
    appended to ``$FUZZ_VIOLATIONS_FILE``.
    """

    using = "default"

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        before = fingerprint(self.using)
        response = self.get_response(request)
        count_request(request, response.status_code)
        if 400 <= response.status_code < 500:
            changed = changed_tables(before, fingerprint(self.using))
            if changed:
                response[CHANGED_HEADER] = ",".join(changed)
                with open(os.environ["FUZZ_VIOLATIONS_FILE"], "a") as out:
                    out.write(
                        f"{request.method} {request.get_full_path()} -> "
                        f"{response.status_code}: {','.join(changed)}\n"
                    )
        return response


# --- the server -----------------------------------------------------------------------


def pg_url(alias: str = "pg") -> str:
    from checkpoints.dburl import database_url

    return database_url(connections[alias].settings_dict)


@dataclass
class PgServer:
    url: str
    log: Path
    violations: Path
    requests: Path
    process: subprocess.Popen = field(repr=False)

    def server_errors(self) -> list[str]:
        """Tracebacks the server logged (django.request errors)."""
        text = self.log.read_text(errors="replace")
        return [chunk for chunk in text.split("\n\n") if "Traceback" in chunk]

    def stored_changes(self) -> list[str]:
        return self.violations.read_text().splitlines() if self.violations.exists() else []

    def requests_by_route(self, prefix: str = "") -> dict[str, Counter]:
        """ "METHOD route" -> Counter of status classes ("2xx", "4xx", ...) served so far."""
        found: dict[str, Counter] = {}
        lines = self.requests.read_text().splitlines() if self.requests.exists() else []
        for line in lines:
            method, route, status = line.split("\t")
            if route.startswith(prefix):
                found.setdefault(f"{method} {route}", Counter())[f"{status[0]}xx"] += 1
        return found

    def summary(self, prefix: str = "") -> str:
        rows = sorted(self.requests_by_route(prefix).items())
        return "\n".join(
            f"  {name}: {sum(c.values())} ({', '.join(f'{k} {v}' for k, v in sorted(c.items()))})"
            for name, c in rows
        )


def start_pg_server(tmp_path: Path) -> PgServer:
    from tests.private_servers import free_port
    from tests.standalone import service_env

    port = free_port()
    log, violations = tmp_path / "server.log", tmp_path / "stored-changes.txt"
    requests_file = tmp_path / "requests.tsv"
    env = service_env(
        tmp_path,
        DJANGO_SETTINGS_MODULE="tests.fuzz_settings",
        DJANGO_DEBUG="0",
        DJANGO_SECRET_KEY="fuzz-" + "k" * 20 + "-only-for-the-fuzz-server-" + "x" * 10,
        DJANGO_ALLOWED_HOSTS="127.0.0.1,localhost",
        DATABASE_URL=pg_url(),
        LLM_PROVIDER_CHECKPOINT="postgres",
        FUZZ_VIOLATIONS_FILE=str(violations),
        FUZZ_REQUESTS_FILE=str(requests_file),
        PYTHONPATH=str(ROOT),
    )
    out = open(log, "w")  # noqa: SIM115 - the process writes it until stopped
    process = subprocess.Popen(
        [
            sys.executable,
            "manage.py",
            "runserver",
            f"127.0.0.1:{port}",
            "--noreload",
            "--nothreading",
            "--skip-checks",
        ],
        cwd=ROOT,
        env=env,
        stdout=out,
        stderr=subprocess.STDOUT,
    )
    out.close()
    server = PgServer(f"http://127.0.0.1:{port}", log, violations, requests_file, process)
    import requests

    deadline = time.monotonic() + 30
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited:\n{log.read_text()[-3000:]}")
        try:
            requests.get(f"{server.url}/api/schema/", timeout=5)
            return server
        except requests.ConnectionError as exc:
            if time.monotonic() > deadline:
                stop_pg_server(server)
                raise RuntimeError(f"no answer:\n{log.read_text()[-3000:]}") from exc
            time.sleep(0.2)


def stop_pg_server(server: PgServer) -> None:
    server.process.terminate()
    try:
        server.process.wait(15)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait(10)


@pytest.fixture
def pg_server(pg_seed, tmp_path):
    server = start_pg_server(tmp_path)
    yield server
    stop_pg_server(server)


# --- seed data on the PostgreSQL test database ----------------------------------------


@dataclass
class Seed:
    users: dict
    threads: list[str]
    tokens: dict = field(default_factory=dict)


VIEW_PERMS = (
    "checkpoints.view_thread",
    "checkpoints.view_checkpoint",
    "checkpoints.view_finishedmark",
    "checkpoints.view_auditevent",
    "retention.view_park",
    "retention.view_sweeprun",
)


def _user(username: str, *perms: str, **flags):
    from django.contrib.auth.models import Permission, User

    user = User.objects.db_manager("pg").create_user(username, password="pw-" + username, **flags)
    for perm in perms:
        app_label, codename = perm.split(".")
        user.user_permissions.add(
            Permission.objects.using("pg").get(content_type__app_label=app_label, codename=codename)
        )
    return user


SPARE_THREADS = 30


@pytest.fixture
def pg_seed(transactional_db):
    """Users, tokens and real LangGraph threads (finished, parked, interrupted, forked) on pg."""
    from datetime import timedelta

    from rest_framework.authtoken.models import Token

    from checkpoints.demo import build_demo_graph
    from checkpoints.models import Thread
    from checkpoints.store.orm.ledger import forget_format_checks
    from checkpoints.store.planning import utcnow
    from checkpoints.store.registry import get_saver
    from checkpoints.timetravel import TimeTravel
    from retention.models import Park
    from retention.policy import declare_retention
    from retention.runs import mark_finished
    from tests.admin_fixtures import run_chat, run_paused
    from tests.services import need_service

    need_service(settings.POSTGRES_UNAVAILABLE)
    forget_format_checks()
    users = {
        "root": _user("root", is_staff=True, is_superuser=True),
        "viewer": _user("viewer", *VIEW_PERMS, is_staff=True),
        "sweeper": _user("sweeper", "retention.run_sweep", is_staff=True),
        "alice": _user("alice"),
    }
    saver = get_saver("postgres", using="pg")
    # Spare threads, written first so every list shows the named ones before them: the
    # stateful run deletes threads it follows links to, and a list it empties leaves its
    # links nothing to follow (9 of 71 links were reached once 11 threads were gone).
    for n in range(SPARE_THREADS):
        config = {"configurable": {"thread_id": f"spare-{n}", "user_id": users["alice"].pk}}
        build_demo_graph(saver).invoke({"topic": "spare"}, config)
    Thread.objects.using("pg").filter(thread_id__startswith="spare-").update(owner=users["alice"])
    threads = []
    demo_threads = [("alice-1", "alice"), ("a/b c?%#ü", "alice"), ("done-1", "alice")]
    demo_threads += [(f"root-{n}", "root") for n in range(1, 6)]
    for thread_id, owner in demo_threads:
        config = {"configurable": {"thread_id": thread_id, "user_id": users[owner].pk}}
        build_demo_graph(saver).invoke({"topic": "fuzz"}, config)
        Thread.objects.using("pg").filter(thread_id=thread_id).update(owner=users[owner])
        threads.append(thread_id)
    threads.append(run_chat(saver, "chat-1", turns=3))
    threads.append(run_paused(saver, "paused-1"))
    head = saver.get_tuple({"configurable": {"thread_id": "chat-1"}})
    TimeTravel(saver).fork("chat-1", head.config["configurable"]["checkpoint_id"], "chat-1-fork")
    threads.append("chat-1-fork")
    mark_finished(saver, "alice-1", owner="alice")
    # Past due: the first sweep that is not a dry run deletes it.
    mark_finished(saver, "done-1", owner="alice", now=utcnow() - timedelta(days=3))
    declare_retention(saver, "root-1", waiting_minutes=600, finished_minutes=60)
    Park.objects.using("pg").create(
        thread_id="paused-1",
        deadline=utcnow() + timedelta(days=1),
        created_at=utcnow(),
        owner="root",
        provider="postgres",
    )
    tokens = {name: Token.objects.using("pg").create(user=user).key for name, user in users.items()}
    return Seed(users=users, threads=threads, tokens=tokens)
