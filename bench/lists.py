"""Time the admin and API lists on a seeded PostgreSQL store: server time, in process.

Run by `python -m bench.sweep --lists` in a child process whose deployment store is the
sweep bench's database (``DATABASE_URL``), so the admin and the API read it as they would in
production. Each figure is the median of 5 requests through Django's test Client (no
network, no browser): the view, its queries and the template or serializer.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
os.environ.setdefault("DJANGO_DEBUG", "0")
# DEBUG off refuses the dev key and "*" hosts; a benchmark serves no one.
os.environ.setdefault("DJANGO_SECRET_KEY", "bench-only-" + "0123456789abcdef" * 4)
os.environ.setdefault("DJANGO_ALLOWED_HOSTS", "127.0.0.1")
os.environ.setdefault("LOG_LEVEL", "ERROR")

TARGET_MS = 100.0
REPEAT = 5
SLOW_MS = 1000.0


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


def main() -> int:
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.test import Client

    from checkpoints.models import Checkpoint, Thread

    user, _ = get_user_model().objects.get_or_create(
        username="bench-admin", defaults={"is_staff": True, "is_superuser": True}
    )
    client = Client()
    client.force_login(user)
    threads = Thread.objects.count()
    checkpoints = Checkpoint.objects.count()
    rows: list[tuple[str, str, float, int]] = []

    def measure(what: str, url: str, params: dict) -> None:
        ms, status, runs = median_ms(client, url, params)
        label = "&".join(f"{k}={v}" for k, v in params.items()) or "-"
        rows.append((what, label, ms, status, runs))
        print(
            f"  {what:<22} {label:<44} {ms:9.1f} ms {status} x{runs}", file=sys.stderr, flush=True
        )

    api = "/api/threads/"
    for offset in (0, 50_000, max(0, threads - 50)):
        measure("api thread list", api, {"limit": 50, "offset": offset})
    measure("api thread list", api, {"limit": 50, "status": "finished"})
    # The API's checkpoint list is a thread's history, paged with `before`.
    newest = Thread.objects.order_by("-last_write_at", "-id").values_list("thread_id", flat=True)
    history = f"/api/threads/{newest.first()}/history/"
    first = client.get(history, {"limit": 3}).json()
    measure("api history", history, {"limit": 3})
    if first.get("next_before"):
        measure("api history", history, {"limit": 3, "before": first["next_before"]})

    from django.contrib import admin as django_admin

    # The store-wide checkpoint list counts at most 10,000 rows, so its page numbers stop
    # at 200; a deeper page number is a redirect, not a page. Each list's last page is the
    # one its paginator offers.
    for model, url, extra in (
        (
            Checkpoint,
            "/admin/checkpoints/checkpoint/",
            [{"source": "loop"}, {"durability": "disk"}, {"source": "loop", "durability": "disk"}],
        ),
        (Thread, "/admin/checkpoints/thread/", [{"state": "finished"}]),
    ):
        model_admin = django_admin.site._registry[model]
        last = last_page(model_admin, user, {})
        columns = sortable(model_admin, user)
        orders = [None] + [f"{sign}{i}" for i, _ in columns for sign in ("", "-")]
        what = f"admin {model.__name__.lower()} list"
        for order in orders:
            for page in sorted({1, min(1000, last), last}):
                params = {"p": page} | ({"o": order} if order else {})
                measure(what, url, params)
        for filters in extra:
            end = last_page(model_admin, user, filters)
            for page in sorted({1, min(1000, end), end}):
                measure(what, url, {**filters, "p": page})

    over = [r for r in rows if r[2] > TARGET_MS]
    print(json.dumps({"threads": threads, "checkpoints": checkpoints, "rows": rows, "over": over}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
