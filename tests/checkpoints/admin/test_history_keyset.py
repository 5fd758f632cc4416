"""A thread's history pages by keyset (``?before=`` / ``?after=``), never by OFFSET: every
checkpoint once, in order, both ways; a jump lands on the page that starts with its row."""

from __future__ import annotations

import html
import re
from datetime import timedelta

import pytest
from django.db import connections
from django.test.utils import CaptureQueriesContext

from checkpoints.models import Checkpoint, Thread
from checkpoints.store.planning import utcnow

pytestmark = pytest.mark.django_db(databases=["default", "pg"], transaction=True)
CHECKPOINTS = "/admin/checkpoints/checkpoint/"
SIZE = 500
START = utcnow() - timedelta(days=1)


def seed_thread(alias: str, thread_id: str = "long") -> Thread:
    """One thread of SIZE checkpoints a minute apart; ten ids shared by a subgraph's
    namespace, so a page boundary may fall between two rows of one id."""
    from checkpoints.store.registry import get_saver

    provider = "postgres" if connections[alias].vendor == "postgresql" else "sqlite"
    get_saver(provider, using=alias).get_tuple({"configurable": {"thread_id": "none"}})
    thread = Thread.objects.using(alias).create(
        thread_id=thread_id, created_at=START, last_write_at=START + timedelta(minutes=SIZE)
    )

    def row(n: int, ns: str = "") -> Checkpoint:
        return Checkpoint(
            thread=thread,
            checkpoint_ns=ns,
            checkpoint_id=f"1ef{n:05d}",
            parent_checkpoint_id=f"1ef{n - 1:05d}" if n else None,
            type="msgpack",
            checkpoint=b"",
            source="loop",
            step=n,
            durability="disk",
            created_at=START + timedelta(minutes=n),
        )

    shared = range(45, 500, 50)
    Checkpoint.objects.using(alias).bulk_create(
        [row(n) for n in range(SIZE - len(shared))] + [row(n, "sub:1") for n in shared]
    )
    return thread


def listed(page: str) -> list[tuple[str, str]]:
    """(checkpoint id, pk) of each row, in the order shown."""
    return re.findall(
        r'<th class="field-checkpoint_label"><a href="[^"]*?/(\d+)/change/[^"]*">'
        r"(?:<mark[^>]*>)?([0-9a-f]+)<",
        page,
    )


def link(page: str, css: str) -> str | None:
    found = re.search(rf'class="{css}" href="([^"]+)"', page)
    return html.unescape(found.group(1)) if found else None


def get(client, url: str) -> str:
    """The page at ``url``, a link as the list writes it (a query string of the list)."""
    page = client.get(CHECKPOINTS + url if url.startswith("?") else url)
    assert page.status_code == 200
    return page.content.decode()


def walk(client, first: str, css: str) -> list[str]:
    seen, url = [], first
    while url:
        body = get(client, url)
        seen += [pk for pk, _ in listed(body)]
        url = link(body, css)
    return seen


def test_paging_visits_every_checkpoint_once_both_ways_without_offset(admin_client, settings):
    if "pg" not in settings.DATABASES:
        pytest.fail("the keyset plan is checked on PostgreSQL: the pg test database is required")
    thread = seed_thread("pg")
    every = list(
        Checkpoint.objects.using("pg")
        .filter(thread=thread)
        .order_by("-checkpoint_id", "-pk")
        .values_list("pk", flat=True)
    )
    assert len(every) == SIZE
    first = f"?thread__id__exact={thread.pk}&provider=pg"
    with CaptureQueriesContext(connections["pg"]) as queries:
        down = walk(admin_client, first, "cs-older-page")
    assert [int(pk) for pk in down] == every
    sql = [q["sql"] for q in queries if "checkpoints_checkpoint" in q["sql"]]
    assert sql and not [s for s in sql if "OFFSET" in s.upper()], sql
    assert len([s for s in sql if "LIMIT 50" in s]) == SIZE // 50

    # From the oldest page back up by the "newer" links: the same rows, none twice.
    body = get(admin_client, first)
    while link(body, "cs-older-page"):
        body = get(admin_client, link(body, "cs-older-page"))
    assert "cs-newer-page" in body and "oldest" in body
    up = [pk for pk, _ in listed(body)] + walk(
        admin_client, link(body, "cs-newer-page"), "cs-newer-page"
    )
    assert sorted(int(pk) for pk in up) == sorted(every) and len(up) == len(set(up))


def test_the_keyset_query_walks_the_threads_key_index():
    from checkpoints.admin import keyset

    thread = seed_thread("pg")
    # Other threads written at the same times: the store-wide id index interleaves them.
    for n in range(8):
        seed_thread("pg", f"other-{n}")
    with connections["pg"].cursor() as cur:
        cur.execute("ANALYZE")
    rows = Checkpoint.objects.using("pg").filter(thread=thread)
    deep = rows.filter(checkpoint_id__lt="1ef00300").order_by("-checkpoint_id", "-pk")[:50]
    sql, params = deep.query.sql_with_params()
    assert "OFFSET" not in sql.upper()
    with connections["pg"].cursor() as cur:
        cur.execute("SET enable_seqscan = off")
        cur.execute("EXPLAIN " + sql, params)
        plan = "\n".join(r[0] for r in cur.fetchall())
        cur.execute("RESET enable_seqscan")
    # The thread and the cursor are both conditions on the (thread, checkpoint id) index:
    # not a walk of the store-wide id index that reads other threads' rows and drops them.
    scan = plan[plan.index("checkpoint_thread_order") :]
    assert "Filter" not in plan, plan
    assert "thread_id = " in scan and "checkpoint_id < " in scan, plan
    page = keyset.page(rows, size=50, before="1ef00300")
    assert [r.checkpoint_id for r in page.rows][:2] == ["1ef00299", "1ef00298"]


def _history(client, thread, **params):
    return client.get(CHECKPOINTS, {"thread__id__exact": thread.pk, **params}).content.decode()


def test_a_jump_to_a_step_lands_on_the_page_that_starts_with_it(admin_client):
    thread = seed_thread("default")
    body = _history(admin_client, thread, step__lte=123)
    rows = listed(body)
    assert rows[0][1] == "1ef00123" and len(rows) == 50
    assert re.search(r'<mark class="cs-target">1ef00123</mark>', body)
    assert 'name="step__lte" value="123"' in body
    # Paging on from the jump goes on past it, and the way back leads to the newest.
    older = get(admin_client, link(body, "cs-older-page"))
    assert listed(older)[0][1] == listed(body)[-1][1][:-5] + f"{int(rows[-1][1][3:]) - 1:05d}"
    newer = get(admin_client, link(body, "cs-newer-page"))
    assert listed(newer)[-1][1] == "1ef00124"
    assert link(body, "cs-newest-page") == f"?thread__id__exact={thread.pk}"


def test_a_jump_to_a_time_lands_on_the_newest_checkpoint_written_by_then(admin_client):
    thread = seed_thread("default")
    moment = START + timedelta(minutes=200, seconds=30)
    body = _history(admin_client, thread, created_at__lte=f"{moment:%Y-%m-%d %H:%M:%S}")
    assert listed(body)[0][1] == "1ef00200"
    assert '<mark class="cs-target">1ef00200</mark>' in body


def test_a_bad_jump_says_what_was_wrong(admin_client):
    thread = seed_thread("default")
    body = _history(admin_client, thread, step__lte="soon")
    assert "Jump to step: &#x27;soon&#x27; is not a whole number." in body
    assert listed(body)[0][1] == "1ef00495"
    body = _history(admin_client, thread, created_at__lte="yesterday-ish")
    assert "is not a date and time like 2026-12-01 14:05:00" in body
    body = _history(admin_client, thread, step__lte=-5)
    assert "No checkpoint of this thread at or before step -5; showing the oldest." in body
    assert listed(body)[0][1] == "1ef00000"
