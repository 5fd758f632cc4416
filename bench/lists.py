"""Time the admin and API lists on a seeded PostgreSQL store: server time, in process.

Run by `python -m bench.sweep --lists` in a child process whose deployment store is the
sweep bench's database (``DATABASE_URL``), so the admin and the API read it as they would in
production. Each figure is the median of 5 requests through Django's test Client (no
network, no browser): the view, its queries and the template or serializer.

Measured: the admin thread and checkpoint lists (first, 1000th and last page in every order
offered, and their filters), the admin's status filter for every kind it offers (first and
last page), the API's thread list (offsets, and ``status=`` for every value it accepts, first
and last page), a thread's history through the API, and every console page the scale test
(tests/checkpoints/admin/test_scale.py) asks for, from `console_pages`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from urllib.parse import urlencode

TARGET_MS = 100.0
REPEAT = 5
SLOW_MS = 1000.0


def configure() -> None:
    """The environment of a deployment serving no one (DEBUG off, a throwaway key)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    os.environ.setdefault("DJANGO_DEBUG", "0")
    # DEBUG off refuses the dev key and "*" hosts; a benchmark serves no one.
    os.environ.setdefault("DJANGO_SECRET_KEY", "bench-only-" + "0123456789abcdef" * 4)
    os.environ.setdefault("DJANGO_ALLOWED_HOSTS", "127.0.0.1")
    os.environ.setdefault("LOG_LEVEL", "ERROR")


def store_facts(alias: str, long_thread: str) -> dict:
    """Primary keys the console pages are asked for: the long thread and its checkpoints
    (oldest first), and a thread waiting on a human (an interrupt write at its head)."""
    from checkpoints.channels import INTERRUPT
    from checkpoints.models import Checkpoint, PendingWrite, Thread

    threads = Thread.objects.using(alias)
    long_pk = threads.get(thread_id=long_thread).pk
    waiting_pk = (
        PendingWrite.objects.using(alias)
        .filter(channel=INTERRUPT)
        .order_by("thread_id")
        .values_list("thread_id", flat=True)
        .first()
    )
    long_rows = list(
        Checkpoint.objects.using(alias)
        .filter(thread_id=long_pk)
        .order_by("checkpoint_id")
        .values_list("pk", "checkpoint_id")
    )
    return {"long_pk": long_pk, "waiting_pk": waiting_pk, "long_rows": long_rows}


def console_pages(facts: dict, *, owner_pk: int) -> dict[str, str]:
    """Name -> URL of every console page the scale test and the bench ask for."""
    long_pk, rows = facts["long_pk"], facts["long_rows"]
    cp, th = "/admin/checkpoints/checkpoint/", "/admin/checkpoints/thread/"
    history = f"{cp}?thread__id__exact={long_pk}"
    middle_pk, _ = rows[len(rows) // 2]
    deep_id = rows[len(rows) // 10][1]
    return {
        "admin index": "/admin/",
        "thread list": th,
        "thread list, page 2": f"{th}?p=2",
        "thread list, deep page": f"{th}?p=1500",
        "thread list by id": f"{th}?o=1",
        "thread list by id, reversed": f"{th}?o=-1",
        "thread list by owner": f"{th}?o=3",
        "thread list by last write, oldest first": f"{th}?o=4",
        "thread list, search": f"{th}?q=sweep-4242",
        "thread list, owner filter": f"{th}?owner__id__exact={owner_pk}",
        "thread list, finished": f"{th}?state=finished",
        "thread list, not finished": f"{th}?state=waiting",
        "thread list, unexpired park": f"{th}?park=yes",
        "thread list, no park": f"{th}?park=no",
        "thread page": f"{th}{long_pk}/change/",
        "thread page, waiting on a human": f"{th}{facts['waiting_pk']}/change/",
        "history, first page": history,
        "history, deep page": f"{history}&before={deep_id}",
        "history, newer page": f"{history}&after={deep_id}",
        "history, jump to a step": f"{history}&step__lte={len(rows) // 3}",
        "history, jump to a time": f"{history}&created_at__lte=2000-01-01+00:00:00",
        "checkpoint page": f"{cp}{middle_pk}/change/",
        "checkpoint list": cp,
        "checkpoint list, page 2": f"{cp}?p=2",
        "checkpoint list, source filter": f"{cp}?source=loop",
        "finished marks": "/admin/checkpoints/finishedmark/",
        "parks": "/admin/retention/park/",
        "holds": "/admin/retention/hold/",
        "sweep runs": "/admin/retention/sweeprun/",
        "audit": "/admin/checkpoints/auditevent/",
    }


def status_kinds(model_admin, user) -> list[str]:
    """The kinds the admin's status filter offers, and any other the rule conditions on
    (read from `checkpoints.status` when asked: the rule's kinds change)."""
    from django.test import RequestFactory

    from checkpoints import status
    from checkpoints.admin.filters import StatusFilter

    request = RequestFactory().get("/")
    request.user = user
    offered = StatusFilter(request, {}, model_admin.model, model_admin).lookup_choices
    kinds = [kind for kind, _ in offered]
    for kind in getattr(status, "CONDITION_KINDS", status.KINDS):
        if kind not in kinds:
            kinds.append(kind)
    return kinds


def api_status_values() -> list[str]:
    """Every value the API's thread list accepts for ``status``."""
    from checkpoints.api.views import ThreadQuerySerializer

    return list(ThreadQuerySerializer().fields["status"].values)


def sortable(model_admin, user) -> list[tuple[int, str]]:
    """(``o`` index, name) of the columns the admin's list offers to order by."""
    from django.test import RequestFactory

    request = RequestFactory().get("/")
    request.user = user
    offered = set(model_admin.get_sortable_by(request))
    # The list's columns as the ``o`` parameter counts them: the action checkbox first.
    columns = list(model_admin.get_list_display(request))
    if model_admin.get_actions(request):
        columns.insert(0, "action_checkbox")
    found = []
    fields = {f.name for f in model_admin.model._meta.get_fields()}
    for index, name in enumerate(columns):
        attr = getattr(model_admin, name, None)
        orderable = name in fields or getattr(attr, "admin_order_field", None)
        if orderable and name in offered:
            found.append((index, name))
    return found


def last_page(model_admin, user, params: dict) -> int:
    """The list's last page number for these filters, as its paginator counts it."""
    from django.test import RequestFactory

    request = RequestFactory().get("/", params)
    request.user = user
    return model_admin.get_changelist_instance(request).paginator.num_pages


def median_ms(client, url: str, params: dict) -> tuple[float, int, int]:
    """(median ms, status, how many runs): one run when the first is over ``SLOW_MS``."""
    timings = []
    status = 0
    for _ in range(REPEAT):
        start = time.perf_counter()
        response = client.get(url, params)
        timings.append((time.perf_counter() - start) * 1000)
        status = response.status_code
        if timings[0] > SLOW_MS:
            break  # far over the target already; five runs would take minutes
    return statistics.median(timings), status, len(timings)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.lists", description=__doc__)
    parser.add_argument("--long-thread", required=True, help="the id of the long thread")
    parser.add_argument(
        "--only", default="", help="time only the rows whose list name contains this"
    )
    args = parser.parse_args(argv)
    configure()
    import django

    django.setup()
    from django.conf import settings

    # Production names static files from collectstatic's manifest; a benchmark runs none, so
    # plain names (a dict lookup either way: nothing timed changes).
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }
    from django.contrib import admin as django_admin
    from django.contrib.auth import get_user_model
    from django.test import Client

    from checkpoints.models import Checkpoint, Thread

    user, _ = get_user_model().objects.get_or_create(
        username="bench-admin", defaults={"is_staff": True, "is_superuser": True}
    )
    # The host the deployment allows (the test Client's default, "testserver", is refused).
    client = Client(SERVER_NAME=os.environ["DJANGO_ALLOWED_HOSTS"].split(",")[0])
    client.force_login(user)
    threads = Thread.objects.count()
    checkpoints = Checkpoint.objects.count()
    rows: list[tuple[str, str, float, int, int]] = []

    def measure(what: str, url: str, params: dict | None = None) -> None:
        if args.only not in what:
            return
        params = params or {}
        ms, status, runs = median_ms(client, url, params)
        label = url + ("?" + urlencode(params) if params else "")
        rows.append((what, label, ms, status, runs))
        print(f"  {what:<28} {label:<60} {ms:9.1f} ms {status} x{runs}", file=sys.stderr,
              flush=True)  # fmt: skip

    api = "/api/threads/"
    for offset in (0, 50_000, max(0, threads - 50)):
        measure("api thread list", api, {"limit": 50, "offset": offset})
    for state in ("finished", "waiting"):
        found = client.get(api, {"limit": 1, "state": state}).json()["count"]
        for offset in sorted({0, max(0, found - 50)}):
            measure("api thread list", api, {"limit": 50, "state": state, "offset": offset})
    for kind in api_status_values():
        found = client.get(api, {"limit": 1, "status": kind}).json()["count"]
        for offset in sorted({0, max(0, found - 50)}):
            measure("api status filter", api, {"limit": 50, "status": kind, "offset": offset})
    # The API's checkpoint list is a thread's history, paged with `before`.
    history = f"/api/threads/{args.long_thread}/history/"
    first = client.get(history, {"limit": 3}).json()
    measure("api history", history, {"limit": 3})
    if first.get("next_before"):
        measure("api history", history, {"limit": 3, "before": first["next_before"]})

    thread_admin = django_admin.site._registry[Thread]
    for kind in status_kinds(thread_admin, user):
        end = last_page(thread_admin, user, {"status": kind})
        for page in sorted({1, end}):
            measure(
                "admin status filter", "/admin/checkpoints/thread/", {"status": kind, "p": page}
            )

    # The store-wide checkpoint list counts at most 10,000 rows, so its page numbers stop
    # at 200; a deeper page number is a redirect, not a page. Each list's last page is the
    # one its paginator offers.
    for model, url, extra in (
        (
            Checkpoint,
            "/admin/checkpoints/checkpoint/",
            [{"source": "loop"}, {"durability": "disk"}, {"source": "loop", "durability": "disk"}],
        ),
        (Thread, "/admin/checkpoints/thread/", [{"state": "finished"}, {"state": "waiting"}]),
    ):
        model_admin = django_admin.site._registry[model]
        last = last_page(model_admin, user, {})
        columns = sortable(model_admin, user)
        orders = [None] + [f"{sign}{i}" for i, _ in columns for sign in ("", "-")]
        what = f"admin {model.__name__.lower()} list"
        for order in orders:
            for page in sorted({1, min(1000, last), last}):
                measure(what, url, {"p": page} | ({"o": order} if order else {}))
        for filters in extra:
            end = last_page(model_admin, user, filters)
            for page in sorted({1, min(1000, end), end}):
                measure(what, url, {**filters, "p": page})

    facts = store_facts("default", args.long_thread)
    for name, url in console_pages(facts, owner_pk=user.pk).items():
        measure(f"console: {name}", url)

    over = [r for r in rows if r[2] > TARGET_MS]
    print(json.dumps({"threads": threads, "checkpoints": checkpoints, "rows": rows, "over": over}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
