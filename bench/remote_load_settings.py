"""The project's settings with Django's own connection pool on the store's database, for
`bench.remote_load --django-pool N` (a measured alternative, not the service's default).

Under ASGI Django runs each request's sync view on a thread of its own, so the
request's ORM queries (the token, the thread's owner) open a PostgreSQL connection per
request and close it at the end; Django's pool (5.1+) hands them one of N kept ones.
"""

import os

from project.settings import *  # noqa: F403
from project.settings import DATABASES

DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
    "min_size": 0,
    "max_size": int(os.environ.get("BENCH_DJANGO_POOL_SIZE", "4")),
    "timeout": 60,
}
