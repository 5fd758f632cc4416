"""Time the admin and API pages of one thread holding 10,000 messages (issue: bounded reads).

``python -m bench.messages sqlite|postgres [--messages 10000] [--checkpoints 105]``

Seeds one thread through the store's own saver: its first checkpoint holds
``messages - checkpoints + 1`` LangChain messages and each later one appends one, so the
head holds ``--messages`` and a ``history?limit=100`` page reads 100 checkpoints of about
that many each. The store is a fresh SQLite file under ``var/bench/`` or a fresh
PostgreSQL database ``checkpoint_bench_messages`` (dropped and made again), set up as the
deployment's own store, so the admin and the API read it as they would in production. Each
figure is server time through Django's test Client (no network): the median of
``--repeat`` requests (one when the first is over 10 s).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

PG_DB = "checkpoint_bench_messages"
SLOW_MS = 10_000.0


def configure(family: str, *, sqlite_name: str = "messages.sqlite3", pg_db: str = PG_DB) -> None:
    """Point the project's settings at a fresh store of ``family`` before Django starts
    (a SQLite file ``sqlite_name`` under the bench folder, or PostgreSQL database ``pg_db``)."""
    base = os.environ.get("CHECKPOINTS_BENCH_DIR", os.path.join("var", "bench"))
    os.makedirs(base, exist_ok=True)
    os.environ["DJANGO_SETTINGS_MODULE"] = "project.settings"
    os.environ["DJANGO_DEBUG"] = "0"
    # DEBUG off refuses the dev key and "*" hosts; a benchmark serves no one.
    os.environ.setdefault("DJANGO_SECRET_KEY", "bench-only-" + "0123456789abcdef" * 4)
    os.environ.setdefault("DJANGO_ALLOWED_HOSTS", "127.0.0.1")
    os.environ.setdefault("LOG_LEVEL", "ERROR")
    if family == "sqlite":
        path = os.path.abspath(os.path.join(base, sqlite_name))
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(path + suffix):
                os.remove(path + suffix)
        os.environ["DATABASE_URL"] = f"sqlite:///{path}"
        os.environ["LLM_PROVIDER_CHECKPOINT"] = "sqlite"
        return
    import psycopg

    host = os.environ.get("CHECKPOINTS_BENCH_PG_HOST", "127.0.0.1")
    port = os.environ.get("CHECKPOINTS_BENCH_PG_PORT", "5432")
    user = os.environ.get("CHECKPOINTS_BENCH_PG_USER", "postgres")
    with psycopg.connect(
        host=host, port=port, user=user, dbname="postgres", autocommit=True
    ) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{pg_db}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{pg_db}"')
    os.environ["DATABASE_URL"] = f"postgres://{user}@{host}:{port}/{pg_db}"
    os.environ["LLM_PROVIDER_CHECKPOINT"] = "postgres"


def seed(saver, thread_id: str, messages: int, checkpoints: int, owner) -> None:
    """One thread whose head holds ``messages`` messages, ``checkpoints`` deep."""
    from langchain_core.messages import AIMessage, HumanMessage

    # v4, the format real graphs write (see bench.workload).
    from langgraph.pregel._checkpoint import create_checkpoint, empty_checkpoint

    def message(i: int):
        kind = HumanMessage if i % 2 == 0 else AIMessage
        return kind(content=f"message {i}: what the turn said, about sixty bytes", id=f"m{i}")

    held = [message(i) for i in range(messages - checkpoints + 1)]
    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": "", "user_id": owner.pk}}
    checkpoint = empty_checkpoint()
    for step in range(checkpoints):
        if step:
            held = [*held, message(len(held))]
        versions = dict(checkpoint["channel_versions"])
        new_versions = {}
        for channel in ("messages", "turn"):
            versions[channel] = new_versions[channel] = saver.get_next_version(
                versions.get(channel), None
            )
        base = {
            **checkpoint,
            "channel_values": {"messages": held, "turn": step},
            "channel_versions": versions,
            "versions_seen": {"agent": {"messages": versions["messages"]}},
        }
        checkpoint = create_checkpoint(base, None, step)
        metadata = {"source": "input" if step == 0 else "loop", "step": step, "parents": {}}
        config = saver.put(config, checkpoint, metadata, new_versions)
        config["configurable"]["user_id"] = owner.pk


def median_ms(client, url: str, params: dict, repeat: int) -> tuple[float, int, int]:
    timings, status = [], 0
    for _ in range(repeat):
        start = time.perf_counter()
        response = client.get(url, params)
        timings.append((time.perf_counter() - start) * 1000)
        status = response.status_code
        if timings[0] > SLOW_MS:
            break
    return statistics.median(timings), status, len(timings)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("family", choices=("sqlite", "postgres"))
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--checkpoints", type=int, default=105)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    configure(args.family)

    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client

    from checkpoints.models import Checkpoint, Thread
    from checkpoints.store.registry import get_saver

    call_command("migrate", verbosity=0)
    # DEBUG off serves hashed static names: the admin pages need the manifest.
    call_command("collectstatic", interactive=False, verbosity=0)
    user = get_user_model().objects.create_superuser("bench-admin", "b@example.com", "pw")
    saver = get_saver()
    start = time.perf_counter()
    seed(saver, "big", args.messages, args.checkpoints, user)
    seeded_s = time.perf_counter() - start
    thread = Thread.objects.get(thread_id="big")
    head = Checkpoint.objects.filter(thread=thread).order_by("-checkpoint_id").first()
    # DEBUG is off, so the host must be an allowed one (the test Client's "testserver" is not:
    # every page answered 400 in a few microseconds).
    client = Client(HTTP_HOST="127.0.0.1")
    client.force_login(user)
    print(
        f"{args.family}: thread of {args.checkpoints} checkpoints, head holds "
        f"{args.messages} messages (seeded in {seeded_s:.1f} s)",
        file=sys.stderr,
    )
    rows = []
    pages = [
        ("admin checkpoint page", f"/admin/checkpoints/checkpoint/{head.pk}/change/", {}),
        (
            "admin checkpoint page",
            f"/admin/checkpoints/checkpoint/{head.pk}/change/",
            {"messages_before": 50},
        ),
        ("admin diff page", f"/admin/checkpoints/checkpoint/{head.pk}/changes/", {}),
        ("admin thread page", f"/admin/checkpoints/thread/{thread.pk}/change/", {}),
        ("api history", "/api/threads/big/history/", {"limit": 100}),
        ("api history", "/api/threads/big/history/", {"limit": 100, "select": "values"}),
        ("api history", "/api/threads/big/history/", {"limit": 20, "select": "values"}),
        ("api state", "/api/threads/big/state/", {}),
        ("api state", "/api/threads/big/state/", {"messages_before": 50}),
    ]
    for what, url, params in pages:
        ms, status, runs = median_ms(client, url, params, args.repeat)
        label = "&".join(f"{k}={v}" for k, v in params.items()) or "-"
        if status != 200:
            # A refused page is no timing of the page: stop rather than print it as one.
            raise SystemExit(f"{what} {url} {label}: answered {status}, not 200")
        rows.append((what, label, round(ms, 1), status, runs))
        print(f"  {what:<22} {label:<28} {ms:9.1f} ms {status} x{runs}", file=sys.stderr)
    print(json.dumps({"family": args.family, "messages": args.messages, "rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
