"""The lists' queries are index walks on PostgreSQL: no sort of every row, no SELECT
DISTINCT over a whole table, no per-row lookups for the rows a deep page skips."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext

from checkpoints.admin import CheckpointAdmin, ThreadAdmin
from checkpoints.models import Checkpoint, Thread
from checkpoints.store.planning import utcnow
from tests.admin_fixtures import CHANGELISTS

pytestmark = pytest.mark.django_db(databases=["default", "pg"], transaction=True)


def seed(alias: str, threads: int, per_thread: int) -> None:
    from checkpoints.store.registry import get_saver

    # The saver records the store's format generation first, as it does on a real store.
    provider = "postgres" if connections[alias].vendor == "postgresql" else "sqlite"
    get_saver(provider, using=alias).get_tuple({"configurable": {"thread_id": "none"}})
    now = utcnow()
    # Many ties on last_write_at, as a bulk import or a busy second gives.
    rows = Thread.objects.using(alias).bulk_create(
        Thread(thread_id=f"t{i:05d}", created_at=now, last_write_at=now - timedelta(seconds=i // 7))
        for i in range(threads)
    )
    Checkpoint.objects.using(alias).bulk_create(
        Checkpoint(
            thread=row,
            checkpoint_id=f"{row.pk:06d}-{n:03d}",
            type="msgpack",
            checkpoint=b"",
            source="loop",
            step=n,
            durability="disk",
            created_at=now,
        )
        for row in rows
        for n in range(per_thread)
    )
    with connections[alias].cursor() as cur:
        cur.execute("ANALYZE")


def plan(alias: str, queryset) -> str:
    sql, params = queryset.query.sql_with_params()
    with connections[alias].cursor() as cur:
        # Any sort would still be chosen if no index could give the order; forbid the cheap
        # way out so the test fails when the index is missing, not when the table is small.
        cur.execute("SET enable_sort = off")
        cur.execute("SET enable_seqscan = off")
        cur.execute("EXPLAIN " + sql, params)
        text = "\n".join(row[0] for row in cur.fetchall())
        cur.execute("RESET enable_sort")
        cur.execute("RESET enable_seqscan")
    return text


def test_orderings_are_served_by_indexes(settings):
    if "pg" not in settings.DATABASES:
        pytest.fail("these plans are PostgreSQL's: the pg test database is required")
    seed("pg", 400, 3)
    newest = Checkpoint.objects.using("pg").defer("checkpoint").order_by(*CheckpointAdmin.ordering)
    text = plan("pg", newest[:50])
    assert "Sort" not in text and "checkpoint_id_order" in text, text
    deep = Thread.objects.using("pg").order_by(*ThreadAdmin.ordering).values_list("pk")[300:350]
    text = plan("pg", deep)
    assert "Sort" not in text and "thread_last_write_id" in text, text


def test_checkpoint_filters_read_no_distinct_values(admin_client):
    seed("default", 30, 2)
    with CaptureQueriesContext(connection) as queries:
        page = admin_client.get("/admin/checkpoints/checkpoint/")
    assert page.status_code == 200
    assert not [q["sql"] for q in queries if "DISTINCT" in q["sql"].upper()]
    body = page.content.decode()
    assert "?source=loop" in body and "?durability=disk" in body
    filtered = admin_client.get("/admin/checkpoints/checkpoint/", {"source": "rollback"})
    assert "0 checkpoints" in filtered.content.decode() or "0 results" in filtered.content.decode()


def test_a_deep_api_page_reads_only_its_own_rows(settings):
    from django.contrib.auth.models import User
    from rest_framework.test import APIClient

    seed("default", 120, 1)
    staff = User.objects.create_user("staff", password="x", is_staff=True)
    client = APIClient()
    client.force_authenticate(staff)
    with CaptureQueriesContext(connection) as queries:
        response = client.get("/api/threads/", {"limit": 10, "offset": 100})
    assert response.status_code == 200
    assert len(response.json()["results"]) == 10
    # Annotated (finished-mark) reads touch the page's ten ids only.
    annotated = [q["sql"] for q in queries if "checkpoints_finishedmark" in q["sql"]]
    assert annotated and all(" IN (" in sql for sql in annotated), annotated


def test_a_deep_thread_page_reads_annotations_for_its_own_rows_only(admin_client, settings):
    if "pg" not in settings.DATABASES:
        pytest.fail("these plans are PostgreSQL's: the pg test database is required")
    seed("pg", 400, 1)
    with CaptureQueriesContext(connections["pg"]) as queries:
        page = admin_client.get("/admin/checkpoints/thread/", {"provider": "pg", "p": 7})
    assert page.status_code == 200
    expected = Thread.objects.using("pg").order_by(*ThreadAdmin.ordering)[300:350]
    body = page.content.decode()
    assert all(f">{t.thread_id}</a>" in body for t in expected)
    offset = [q["sql"] for q in queries if "OFFSET" in q["sql"]]
    # The skipped rows are an index walk of bare ids; the subqueries run for 50 rows.
    assert len(offset) == 1 and offset[0].startswith('SELECT "checkpoints_thread"."id" AS')
    annotated = [q["sql"] for q in queries if "has_interrupt" in q["sql"]]
    assert annotated and all(" IN (" in sql and "OFFSET" not in sql for sql in annotated)


def test_the_store_wide_checkpoint_list_counts_at_most_the_cap(admin_client, monkeypatch):
    from checkpoints.admin import history

    monkeypatch.setattr(history, "COUNT_CAP", 25)
    seed("default", 30, 1)
    with CaptureQueriesContext(connection) as queries:
        page = admin_client.get("/admin/checkpoints/checkpoint/").content.decode()
    counts = [q["sql"] for q in queries if "COUNT(" in q["sql"].upper()]
    assert counts and all("LIMIT 25" in sql for sql in counts), counts
    assert "Counted up to 25 checkpoints; there are more." in page


def test_a_status_filter_counts_at_most_its_cap(admin_client, monkeypatch):
    """Under a status filter every thread is asked the rule to be counted: the count stops
    at the cap and the list says there are more; without a filter it counts them all."""
    from checkpoints.admin import threads

    monkeypatch.setattr(threads, "STATUS_COUNT_CAP", 60)
    seed("default", 70, 1)  # all written just now: recent
    with CaptureQueriesContext(connection) as queries:
        page = admin_client.get("/admin/checkpoints/thread/", {"status": "recent"})
    counts = [q["sql"] for q in queries if q["sql"].startswith("SELECT COUNT(*)")]
    assert counts and all("LIMIT 60" in sql for sql in counts), counts
    # The page's rows are read by key with their annotations, without the filter again.
    rows = [q["sql"] for q in queries if '"checkpoints_thread"."version"' in q["sql"]]
    assert len(rows) == 1 and '"last_write_at" >=' not in rows[0], rows
    body = page.content.decode()
    assert "Counted up to 60 threads; there are more." in body
    assert body.count('class="field-thread_id"') == 50
    # The second page holds the rest of the 60 counted.
    second = admin_client.get("/admin/checkpoints/thread/", {"status": "recent", "p": 2})
    assert second.content.decode().count('class="field-thread_id"') == 10
    plain = admin_client.get("/admin/checkpoints/thread/").content.decode()
    assert "Counted up to" not in plain and "70 threads" in plain


def test_the_status_filter_starts_from_the_status_writes_index(settings):
    from django.contrib.auth.models import User
    from django.test import RequestFactory

    from checkpoints.admin import StatusFilter
    from checkpoints.models import PendingWrite

    if "pg" not in settings.DATABASES:
        pytest.fail("these plans are PostgreSQL's: the pg test database is required")
    seed("pg", 400, 2)
    thread = Thread.objects.using("pg").get(thread_id="t00007")
    PendingWrite.objects.using("pg").create(
        thread=thread,
        checkpoint_id=f"{thread.pk:06d}-001",
        task_id="t",
        idx=0,
        channel="__interrupt__",
        type="msgpack",
        blob=b"",
    )
    with connections["pg"].cursor() as cur:
        cur.execute("ANALYZE")
    from django.contrib import admin as django_admin

    request = RequestFactory().get("/", {"status": "waiting_on_human"})
    request.user = User(is_superuser=True, is_staff=True)
    thread_admin = django_admin.site._registry[Thread]
    rows = thread_admin.get_queryset(request).using("pg")
    chosen = StatusFilter(request, {"status": ["waiting_on_human"]}, Thread, thread_admin)
    waiting = chosen.queryset(request, rows)
    assert [t.thread_id for t in waiting] == ["t00007"]
    text = plan("pg", waiting.values_list("pk"))
    assert "write_status_channel" in text, text


def test_the_finished_thread_list_starts_from_the_marks_not_the_write_order(settings):
    """Finished threads are the old ones: walking the write-order index for them reads
    nearly every thread before the first page is full."""
    from django.contrib.auth import get_user_model

    from checkpoints.api.queries import thread_list
    from checkpoints.models import FinishedMark
    from checkpoints.store.registry import get_saver

    if "pg" not in settings.DATABASES:
        pytest.fail("these plans are PostgreSQL's: the pg test database is required")
    # Enough threads that the planner would rather stop an index walk early than join.
    seed("pg", 20000, 0)
    now = utcnow()
    oldest = Thread.objects.using("pg").order_by("last_write_at", "pk")[:2000]
    FinishedMark.objects.using("pg").bulk_create(
        FinishedMark(thread_id=t.thread_id, marked_at=now, due_at=now) for t in oldest
    )
    with connections["pg"].cursor() as cur:
        cur.execute("ANALYZE")
    staff = get_user_model()(username="ops", is_staff=True)
    page = thread_list(saver=get_saver("postgres", using="pg"), user=staff, state="finished")
    ids = page.items.values_list("pk", flat=True)[:50]
    sql, params = ids.query.sql_with_params()
    with connections["pg"].cursor() as cur:
        cur.execute("EXPLAIN " + sql, params)
        text = "\n".join(row[0] for row in cur.fetchall())
    assert "thread_last_write_id" not in text, text
    assert len(page) == 2000 and len(page[:50]) == 50
    newest_finished = max(oldest, key=lambda t: (t.last_write_at, t.pk))
    assert page[:1][0].thread_id == newest_finished.thread_id


@pytest.mark.parametrize("alias", ["pg", "default"])
def test_the_big_lists_count_and_page_with_jit_off_on_postgresql(alias):
    """JIT compiled the status filter's count for 650 ms of a 700 ms answer at 100,000
    threads; the paginator turns it off for its own statements only."""
    from checkpoints.admin.paging import IndexPaginator
    from checkpoints.pages import without_jit

    seed(alias, threads=30, per_thread=1)
    rows = Thread.objects.using(alias).order_by("-last_write_at", "-id")
    with CaptureQueriesContext(connections[alias]) as seen:
        paginator = IndexPaginator(rows, 10, cap=25)
        assert paginator.count == 25 and paginator.capped
        assert len(paginator.page(3).object_list) == 5
    sql = " ".join(q["sql"] for q in seen.captured_queries)
    if connections[alias].vendor == "postgresql":
        assert sql.count("SET LOCAL jit = off") == 2
        with without_jit(alias), connections[alias].cursor() as cur:
            cur.execute("SHOW jit")
            assert cur.fetchone()[0] == "off"
        with connections[alias].cursor() as cur:
            cur.execute("SHOW jit")
            assert cur.fetchone()[0] == "on"
    else:
        assert "jit" not in sql
    # The capped count reads bare ids: none of the list's annotations, in no order.
    count_sql = next(q["sql"] for q in seen.captured_queries if "COUNT(" in q["sql"])
    assert "ORDER BY" not in count_sql.upper()


def test_the_waiting_and_failed_filters_look_their_threads_up_by_key(settings):
    """One thread in a hundred waits (or failed): PostgreSQL plans ``IN (subquery)`` as a
    semi join over every thread; the filter has it look the few up by primary key."""
    from django.contrib import admin as django_admin
    from django.contrib.auth.models import User
    from django.test import RequestFactory

    from checkpoints.admin import StatusFilter
    from checkpoints.models import PendingWrite

    if "pg" not in settings.DATABASES:
        pytest.fail("these plans are PostgreSQL's: the pg test database is required")
    seed("pg", 20000, 1)
    PendingWrite.objects.using("pg").bulk_create(
        PendingWrite(
            thread=thread,
            checkpoint_id=f"{thread.pk:06d}-000",
            task_id=channel,
            idx=0,
            channel=channel,
            type="msgpack",
            blob=b"",
        )
        for thread in Thread.objects.using("pg").filter(thread_id__endswith="00")
        for channel in ("__interrupt__", "__error__")
    )
    with connections["pg"].cursor() as cur:
        cur.execute("ANALYZE")
    thread_admin = django_admin.site._registry[Thread]
    for kind, found in (("waiting_on_human", 200), ("failed", 200)):
        request = RequestFactory().get("/", {"status": kind})
        request.user = User(is_superuser=True, is_staff=True)
        rows = thread_admin.get_queryset(request).using("pg")
        chosen = StatusFilter(request, {"status": [kind]}, Thread, thread_admin).queryset(
            request, rows
        )
        # Every interrupted thread also failed: the markers hold together (issue 54).
        assert chosen.count() == found, kind
        # Compiled for PostgreSQL (sql_with_params would compile for the default database).
        sql, params = chosen.values_list("pk").query.get_compiler(using="pg").as_sql()
        with connections["pg"].cursor() as cur:
            cur.execute("EXPLAIN " + sql, params)
            text = "\n".join(row[0] for row in cur.fetchall())
        assert "Seq Scan on checkpoints_thread" not in text, (kind, text)


@pytest.mark.parametrize("changelist", CHANGELISTS)
def test_no_list_reads_distinct_values_for_its_filters(admin_client, changelist):
    from retention.models import Park, SweepRun

    seed("default", 5, 1)
    now = utcnow()
    Park.objects.create(thread_id="t00001", deadline=now, created_at=now, provider="sqlite")
    SweepRun.objects.create(
        started_at=now, provider="sqlite", waiting_minutes=60, finished_minutes=30
    )
    with CaptureQueriesContext(connection) as queries:
        page = admin_client.get(f"/admin/{changelist}/")
    assert page.status_code == 200
    assert not [q["sql"] for q in queries if "DISTINCT" in q["sql"].upper()]
    names = {"retention/park": "park", "retention/sweeprun": "sweep run"}
    if changelist in names:
        # The provider filter offers every registered provider and filters by it.
        assert "?provider=memory" in page.content.decode()
        name = names[changelist]
        one = admin_client.get(f"/admin/{changelist}/", {"provider": "sqlite"}).content.decode()
        none = admin_client.get(f"/admin/{changelist}/", {"provider": "redis"}).content.decode()
        assert f"1 {name}\n" in one and f"0 {name}s\n" in none, (one, none)


@pytest.mark.parametrize("order", ["3", "-3", "4", "-4"])
def test_the_thread_list_by_owner_or_last_write_walks_an_index_either_way(
    admin_client, settings, order
):
    """Ties follow the chosen column's direction, so no ordering sorts every thread."""
    from django.contrib.auth import get_user_model

    if "pg" not in settings.DATABASES:
        pytest.fail("these plans are PostgreSQL's: the pg test database is required")
    seed("pg", 400, 0)
    owners = [
        get_user_model().objects.db_manager("pg").create_user(f"owner{n}", password="x")
        for n in range(3)
    ]
    for n, owner in enumerate(owners):
        Thread.objects.using("pg").filter(pk__in=range(n * 100, n * 100 + 100)).update(owner=owner)
    with connections["pg"].cursor() as cur:
        cur.execute("ANALYZE")
    with CaptureQueriesContext(connections["pg"]) as queries:
        page = admin_client.get("/admin/checkpoints/thread/", {"provider": "pg", "o": order})
    assert page.status_code == 200
    ids = [q["sql"] for q in queries if q["sql"].startswith('SELECT "checkpoints_thread"."id" AS')]
    assert len(ids) == 1, ids
    fields = ("owner", "last_write_at", "id") if order.endswith("3") else ("last_write_at", "id")
    sign = "-" if order.startswith("-") else ""
    expected = Thread.objects.using("pg").order_by(*(sign + f for f in fields))
    with connections["pg"].cursor() as cur:
        cur.execute("SET enable_sort = off")
        cur.execute("EXPLAIN " + ids[0])
        text = "\n".join(row[0] for row in cur.fetchall())
        cur.execute("RESET enable_sort")
    assert "Sort" not in text, text
    # The page lists the threads in that order (the ties by last write, then id, alike).
    body = page.content.decode()
    shown = [t.thread_id for t in expected[:50]]
    positions = [body.index(f">{thread_id}</a>") for thread_id in shown]
    assert positions == sorted(positions)


def test_the_store_wide_checkpoint_list_sorts_only_by_an_indexed_column(admin_client):
    seed("default", 3, 2)
    page = admin_client.get("/admin/checkpoints/checkpoint/")
    sortable = {header["text"] for header in page.context["result_headers"] if header["sortable"]}
    assert sortable == {"checkpoint"}, sortable
    oldest_first = admin_client.get("/admin/checkpoints/checkpoint/", {"o": "1"})
    listed = re.findall(r"\d{6}-\d{3}", oldest_first.content.decode())
    assert listed and listed == sorted(listed), listed
    # An order asked for by hand anyway (o=3, the step column) is not applied.
    by_step = admin_client.get("/admin/checkpoints/checkpoint/", {"o": "3"})
    assert by_step.status_code == 200
    newest = Checkpoint.objects.order_by("-checkpoint_id").first()
    assert by_step.content.decode().index(newest.checkpoint_id) == min(
        by_step.content.decode().index(c.checkpoint_id) for c in Checkpoint.objects.all()
    )


@pytest.mark.parametrize("query", [{"state": "finished"}, {"status": "finished"}])
def test_the_admin_finished_list_starts_from_the_marks_not_the_write_order(
    admin_client, settings, query
):
    """The admin's two finished filters order their few old threads as the API does."""
    from checkpoints.models import FinishedMark

    if "pg" not in settings.DATABASES:
        pytest.fail("these plans are PostgreSQL's: the pg test database is required")
    seed("pg", 20000, 0)
    now = utcnow()
    oldest = list(Thread.objects.using("pg").order_by("last_write_at", "pk")[:2000])
    FinishedMark.objects.using("pg").bulk_create(
        # Due tomorrow: the status rule's "finished" (a mark due now is "due").
        FinishedMark(thread_id=t.thread_id, marked_at=now, due_at=now + timedelta(days=1))
        for t in oldest
    )
    with connections["pg"].cursor() as cur:
        cur.execute("ANALYZE")
    with CaptureQueriesContext(connections["pg"]) as queries:
        page = admin_client.get("/admin/checkpoints/thread/", {"provider": "pg", **query})
    assert page.status_code == 200
    ids = [q["sql"] for q in queries if q["sql"].startswith('SELECT "checkpoints_thread"."id" AS')]
    assert len(ids) == 1, ids
    with connections["pg"].cursor() as cur:
        cur.execute("EXPLAIN " + ids[0])
        text = "\n".join(row[0] for row in cur.fetchall())
    assert "thread_last_write_id" not in text, text
    newest = sorted(oldest, key=lambda t: (t.last_write_at, t.pk), reverse=True)[:50]
    body = page.content.decode()
    positions = [body.index(f">{t.thread_id}</a>") for t in newest]
    assert positions == sorted(positions)


def test_values_from_another_database_travel_as_one_array_on_postgresql(settings):
    from checkpoints.status import AmongValues

    if "pg" not in settings.DATABASES:
        pytest.fail("these plans are PostgreSQL's: the pg test database is required")
    seed("pg", 5, 0)
    seed("default", 5, 0)
    wanted = {"t00001", "t00003", "nowhere"}
    pg = Thread.objects.using("pg").filter(AmongValues("thread_id", wanted))
    sql, params = pg.values_list("pk").query.get_compiler(using="pg").as_sql()
    assert "= ANY(%s)" in sql and list(params) == [sorted(wanted)], (sql, params)
    assert sorted(pg.values_list("thread_id", flat=True)) == ["t00001", "t00003"]
    assert Thread.objects.using("pg").exclude(AmongValues("thread_id", wanted)).count() == 3
    lite = Thread.objects.using("default").filter(AmongValues("thread_id", wanted))
    assert sorted(lite.values_list("thread_id", flat=True)) == ["t00001", "t00003"]
    for alias in ("pg", "default"):
        none = Thread.objects.using(alias).filter(AmongValues("thread_id", []))
        assert none.count() == 0
        assert Thread.objects.using(alias).exclude(AmongValues("thread_id", [])).count() == 5


@pytest.mark.parametrize("alias", ["pg", "default"])
def test_a_page_in_the_second_half_is_walked_from_the_far_end(alias):
    """The last page of 2,000 cost an OFFSET walk of 99,950 index entries (70-130 ms at
    100,000 threads); read from the far end it costs what the first page does. Every page
    must still hold exactly the rows a forward walk gives, ties included."""
    from checkpoints.admin.paging import IndexPaginator
    from checkpoints.pages import unindexed

    seed(alias, threads=47, per_thread=1)
    threads = Thread.objects.using(alias)
    for ordering in (
        ("-last_write_at", "-id"),
        ("last_write_at", "id"),
        ("-thread_id",),
        (unindexed("last_write_at").desc(), "-id"),
    ):
        rows = threads.order_by(*ordering)
        expected = list(rows.values_list("pk", flat=True))
        paginator = IndexPaginator(rows, 10, orphans=2)
        pages = []
        for number in paginator.page_range:
            with CaptureQueriesContext(connections[alias]) as seen:
                page = paginator.page(number)
            pages += [row.pk for row in page.object_list]
            offsets = [
                int(n) for q in seen.captured_queries for n in re.findall(r"OFFSET (\d+)", q["sql"])
            ]
            # Never more than half the rows skipped: the far pages start from the other end.
            assert all(n <= len(expected) // 2 for n in offsets), (number, offsets)
        assert pages == expected, ordering
    # The last page's walk skips nothing at all.
    with CaptureQueriesContext(connections[alias]) as seen:
        last = paginator.page(paginator.num_pages)
    assert len(last.object_list) == 7
    assert not any("OFFSET" in q["sql"] for q in seen.captured_queries)


def test_the_api_status_list_counts_bare_ids_with_jit_off(settings):
    """The API's status filters paid JIT compiling for 1-3 s of a page at 100,000 threads,
    and its count computed every row's annotations: it counts bare ids, JIT off, as the
    admin's paginator does."""
    from django.contrib.auth import get_user_model

    from checkpoints.api.queries import thread_list
    from checkpoints.store.registry import get_saver

    if "pg" not in settings.DATABASES:
        pytest.fail("these plans are PostgreSQL's: the pg test database is required")
    seed("pg", 30, 1)
    staff = get_user_model()(username="ops", is_staff=True)
    page = thread_list(saver=get_saver("postgres", using="pg"), user=staff, status="recent")
    with CaptureQueriesContext(connections["pg"]) as seen:
        assert len(page) == 30
        assert len(page[0:10]) == 10
    sql = [q["sql"] for q in seen.captured_queries]
    assert sum("SET LOCAL jit = off" in q for q in sql) == 2, sql
    count = next(q for q in sql if "COUNT(" in q.upper())
    # The annotations stay in the WHERE clause; none is selected (Django would count over a
    # subquery of the annotated rows), so none is computed for every counted thread.
    assert count.startswith('SELECT COUNT(*) AS "__count" FROM "checkpoints_thread" WHERE')
    assert ' AS "has_interrupt"' not in count, count


def test_the_declared_horizons_are_read_from_their_partial_index(settings):
    """Every status filter reads the distinct waiting horizons threads declare; without the
    partial index that is a scan of every thread (20 ms at 100,000)."""
    from checkpoints.status import _past_horizon

    if "pg" not in settings.DATABASES:
        pytest.fail("these plans are PostgreSQL's: the pg test database is required")
    seed("pg", 400, 0)
    Thread.objects.using("pg").filter(pk__in=list(Thread.objects.using("pg").values_list(
        "pk", flat=True)[:3])).update(waiting_minutes=30)  # fmt: skip
    with connections["pg"].cursor() as cur:
        cur.execute("ANALYZE")
    declared = (
        Thread.objects.using("pg")
        .filter(waiting_minutes__isnull=False)
        .order_by()
        .values_list("waiting_minutes", flat=True)
        .distinct()
    )
    assert list(declared) == [30]
    text = plan("pg", declared)
    assert "thread_declared_waiting" in text and "Seq Scan" not in text, text
    # The rule's per-horizon range is answered from it too.
    finished, idle_past, _shortest = _past_horizon("pg", utcnow() + timedelta(hours=1))
    idle = Thread.objects.using("pg").filter(finished | idle_past)
    assert idle.filter(waiting_minutes=30).count() == 3
    text = plan("pg", idle.filter(waiting_minutes=30).values_list("pk"))
    assert "thread_declared_waiting" in text, text


@pytest.mark.parametrize("kind", ["recent", "idle"])
def test_the_unmarked_test_hashes_the_marks_once(settings, kind):
    """Counting the idle threads asks every thread whether it is marked: an anti join probed
    the marks' index once per thread (half of a 110 ms count at 100,000 threads); a hashed
    NOT IN reads the marks once."""
    from django.contrib.auth import get_user_model

    from checkpoints.api.queries import thread_list
    from checkpoints.models import FinishedMark
    from checkpoints.store.registry import get_saver

    if "pg" not in settings.DATABASES:
        pytest.fail("these plans are PostgreSQL's: the pg test database is required")
    seed("pg", 400, 1)
    now = utcnow()
    FinishedMark.objects.using("pg").bulk_create(
        FinishedMark(thread_id=f"t{i:05d}", marked_at=now, due_at=now + timedelta(days=1))
        for i in range(0, 400, 10)
    )
    with connections["pg"].cursor() as cur:
        cur.execute("ANALYZE")
    staff = get_user_model()(username="ops", is_staff=True)
    page = thread_list(saver=get_saver("postgres", using="pg"), user=staff, status=kind)
    assert len(page) == (360 if kind == "recent" else 0)
    sql, params = page.items.order_by().values("pk").query.get_compiler(using="pg").as_sql()
    with connections["pg"].cursor() as cur:
        cur.execute("EXPLAIN SELECT count(*) FROM (" + sql + ") c", params)
        text = "\n".join(row[0] for row in cur.fetchall())
    assert "Anti Join" not in text and "hashed SubPlan" in text, text


def test_idle_reads_the_quiet_range_and_the_answered_interrupts_by_id(settings):
    """Idle is the quiet range (past recent, not past the horizon) plus the few threads past
    the horizon that an answered interrupt spares, looked up by id: index reads bounded in
    write order, never a scan of every thread (74 -> 37 ms at 100,000 threads)."""
    from checkpoints.status import status_condition, with_status_facts
    from checkpoints.store.registry import get_saver

    if "pg" not in settings.DATABASES:
        pytest.fail("these plans are PostgreSQL's: the pg test database is required")
    seed("pg", 400, 1)
    with connections["pg"].cursor() as cur:
        cur.execute("ANALYZE")
    saver = get_saver("postgres", using="pg")
    rows = with_status_facts(Thread.objects.using("pg")).filter(
        status_condition("idle", utcnow(), saver=saver)
    )
    sql, params = rows.order_by().values("pk").query.get_compiler(using="pg").as_sql()
    with connections["pg"].cursor() as cur:
        # A 400-row table is read whole whatever the query; the question is whether the
        # condition can be answered from the indexes at all.
        cur.execute("SET enable_seqscan = off")
        try:
            cur.execute("EXPLAIN SELECT count(*) FROM (" + sql + ") c", params)
            text = "\n".join(row[0] for row in cur.fetchall())
        finally:
            cur.execute("RESET enable_seqscan")
    thread_reads = [line for line in text.splitlines() if "on checkpoints_thread " in line]
    assert not any("Seq Scan" in line for line in thread_reads), text
    # Bounded in write order (the quiet range, or the bound both of idle's arms imply),
    # with the answered interrupts looked up by id where they are an arm of their own.
    conds = [line for line in text.splitlines() if "Index Cond:" in line]
    assert any("last_write_at <" in line for line in conds), text
    assert "id = ANY" in text, text


@pytest.mark.parametrize("offset", [0, 1050])
def test_an_api_page_sorted_whole_or_deep_and_costly_reads_its_count_with_it(offset):
    """A list sorted whole anyway (finished: ordered by an expression no index holds), or a
    deep page under a status filter, reads its rows' keys and its count in one statement; a
    deep page of a cheap list is counted apart and walked from the nearer end. Each answer
    is the one the plain count and walk gave."""
    from django.contrib.auth.models import User
    from rest_framework.test import APIClient

    from checkpoints import pages
    from checkpoints.models import FinishedMark

    assert pages.DEEP_OFFSET <= 1050
    seed("default", 1200, 0)  # all written in the last few minutes: recent
    now = utcnow()
    FinishedMark.objects.bulk_create(
        FinishedMark(thread_id=f"t{i:05d}", marked_at=now, due_at=now + timedelta(days=1))
        for i in range(0, 1200, 10)
    )
    staff = User.objects.create_user("staff", password="x", is_staff=True)
    client = APIClient()
    client.force_authenticate(staff)
    expected = list(
        Thread.objects.order_by("-last_write_at", "-pk").values_list("thread_id", flat=True)
    )
    marked = set(FinishedMark.objects.values_list("thread_id", flat=True))

    def get(**asked):
        with CaptureQueriesContext(connection) as queries:
            answer = client.get("/api/threads/", {"limit": 7, **asked}).json()
        windows = [q["sql"] for q in queries if "OVER ()" in q["sql"]]
        counts = [q["sql"] for q in queries if q["sql"].startswith("SELECT COUNT(*)")]
        return answer, len(windows), len(counts)

    plain, windows, counts = get(offset=offset)
    assert (windows, counts) == (0, 1)
    assert plain["count"] == 1200
    assert [t["thread_id"] for t in plain["results"]] == expected[offset : offset + 7]
    recent, windows, counts = get(offset=offset, status="recent")
    assert (windows, counts) == ((1, 0) if offset else (0, 1))
    unmarked = [t for t in expected if t not in marked]
    assert recent["count"] == 1080
    assert [t["thread_id"] for t in recent["results"]] == unmarked[offset : offset + 7]
    few, windows, counts = get(offset=3, status="finished")
    assert (windows, counts) == (1, 0)
    assert few["count"] == 120
    assert len(few["results"]) == 7 and {t["thread_id"] for t in few["results"]} <= marked
    # Past the end no row carries the count: it is counted apart, and the page is empty.
    past, _windows, _counts = get(offset=5000, status="recent")
    assert past["count"] == 1080 and past["results"] == []


def test_an_admin_list_sorted_whole_reads_its_count_with_the_page(admin_client):
    """The admin's few, old kinds (finished here) are sorted whole for any page: the page's
    keys come with the exact count, which is then not capped."""
    from checkpoints.models import FinishedMark

    seed("default", 130, 0)
    now = utcnow()
    FinishedMark.objects.bulk_create(
        FinishedMark(thread_id=f"t{i:05d}", marked_at=now, due_at=now + timedelta(days=1))
        for i in range(0, 130, 2)
    )
    with CaptureQueriesContext(connection) as queries:
        second = admin_client.get("/admin/checkpoints/thread/", {"status": "finished", "p": 2})
    body = second.content.decode()
    assert second.status_code == 200
    assert [q for q in queries if "OVER ()" in q["sql"]]
    assert not [q for q in queries if q["sql"].startswith("SELECT COUNT(*)")]
    assert "65 threads" in body and "Counted up to" not in body
    assert body.count('class="field-thread_id"') == 15


def test_a_page_of_a_kind_most_threads_are_in_walks_the_index(admin_client, settings):
    """Idle and recent: the planner, multiplying the rule's selectivities, expects few and
    sorts every match for a deep page; the keys are read with sorting off (a walk of the
    write-order index), and the rows' annotations with it on again."""
    from checkpoints import status

    if "pg" not in settings.DATABASES:
        pytest.fail("these plans are PostgreSQL's: the pg test database is required")
    assert set(status.MANY) == {"recent", "idle"}
    seed("pg", 120, 1)  # written just now: recent
    with CaptureQueriesContext(connections["pg"]) as queries:
        page = admin_client.get(
            "/admin/checkpoints/thread/", {"provider": "pg", "status": "recent", "p": 2}
        )
    assert page.status_code == 200
    sqls = [q["sql"] for q in queries]
    off = sqls.index("SET LOCAL enable_sort = off")
    assert sqls[off + 1].startswith('SELECT "checkpoints_thread"."id" AS "pk"') and (
        "OFFSET 50" in sqls[off + 1]
    )
    assert sqls[off + 2] == "RESET enable_sort"
    # The page is the second 50 of the write order.
    expected = Thread.objects.using("pg").order_by(*ThreadAdmin.ordering)[50:100]
    body = page.content.decode()
    assert all(f">{t.thread_id}</a>" in body for t in expected)
    for kind in ("failed", "waiting_on_human"):
        with CaptureQueriesContext(connections["pg"]) as queries:
            admin_client.get("/admin/checkpoints/thread/", {"provider": "pg", "status": kind})
        assert "SET LOCAL enable_sort = off" not in [q["sql"] for q in queries]
