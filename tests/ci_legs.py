"""Which tests CI's second leg (Django 6.0 on Python 3.12) leaves to the first.

Both legs ran every test until the suite outgrew CI's hour (a landing took 89.5 minutes of
its 90). The second leg is there to catch what changes with Django's version: the ORM's
queries, the admin, DRF, the checks, the middleware, the templates. The tests below are
marked ``one_leg`` and run in the first leg only (`.ci/run` deselects them in the second),
because what they check is the same whatever Django this run has.
"""

from __future__ import annotations

import pytest

# The store fixture's providers that keep checkpoints outside Django's ORM: their savers'
# reads and writes are the same code under any Django (the ORM providers, sqlite and
# postgres, run in both legs).
NOT_ORM_PROVIDERS = {"memory", "redis", "redis-cluster", "redis-sentinel", "remote"}

# Module -> why it runs in the first leg only.
FIRST_LEG_ONLY = {
    # Their subject runs in an interpreter they build themselves.
    "tests/test_fresh_install.py": "installs into a fresh Python 3.11 venv",
    "tests/test_floor_versions.py": "builds a venv on the pins' floor (Django 5.2)",
    "tests/test_demo.py": "scripts/demo.sh installs and serves its own .venv",
    # Processes killed, raced or restarted, and servers failed over: what they check is
    # the store's and the servers' behaviour, not Django's.
    "tests/test_concurrency.py": "writer processes racing the sweep",
    "tests/test_nothing_lost.py": "a state machine of saver calls",
    "tests/remote/test_faults.py": "kill -9 of a service process",
    "tests/remote/test_scale_out.py": "two service processes on one store",
    "tests/remote/test_smoke.py": "LangGraph's conformance suite through the client",
    "tests/checkpoints/transfer/test_commands.py": "kill -9 of an import",
    "tests/checkpoints/transfer/test_import_parallel.py": "forked import workers",
    "tests/checkpoints/transfer/test_import_bombs.py": "memory bounds of the import reader",
    "tests/checkpoints/transfer/test_round4_store_sources.py": "LangGraph's own tables read",
    "tests/checkpoints/transfer/test_langgraph_tables.py": "LangGraph's own tables read",
    "tests/retention/test_celery_worker.py": "real Celery workers",
    "tests/retention/test_sweep_lease.py": "sweep leases across processes",
    "tests/retention/test_sweep_exact.py": "sweeps racing writer processes",
    "tests/checkpoints/store/test_pgbouncer.py": "a private PgBouncer",
    "tests/checkpoints/store/test_redis_cluster.py": "a private Redis Cluster",
    "tests/checkpoints/store/test_standby.py": "a standby server taken away",
    "tests/checkpoints/store/test_cold_start.py": "a process's first call",
    "tests/checkpoints/store/test_from_conn_string.py": "fresh databases a saver opens",
    "tests/checkpoints/store/test_new_store_schema.py": "the schema on fresh databases",
    "tests/checkpoints/store/test_sqlite_space.py": "SQLite file sizes",
    "tests/test_first_hour.py": "manage.py check against servers that are not there",
    "tests/test_bench_remote_load.py": "the load benchmark's own checks",
    # Searches whose cost is their number of examples: the first leg runs the search.
    "tests/checkpoints/api/test_schemathesis.py": "schemathesis over the API",
    "tests/checkpoints/langgraph_api/test_schemathesis.py": "schemathesis over /langgraph",
    "tests/checkpoints/langgraph_api/test_round4_fuzz.py": "a fuzzer over /langgraph",
    "tests/checkpoints/admin/test_admin_fuzz.py": "a fuzzer over the admin",
    # Compared with LangGraph's own server, whose answers do not depend on our Django.
    "tests/checkpoints/langgraph_api/test_differential.py": "against `langgraph dev`",
    "tests/checkpoints/langgraph_api/test_differential_meta.py": "against `langgraph dev`",
    # Pages of 1,000 checkpoints in the browser; the browser tests of the same pages at
    # small sizes run in both legs.
    "tests/checkpoints/admin/test_browser_subgraphs.py": "large trees in the browser",
    "tests/checkpoints/admin/test_browser_tree.py": "large trees in the browser",
}


def mark_first_leg_only(items: list[pytest.Item]) -> None:
    mark = pytest.mark.one_leg
    for item in items:
        module = item.nodeid.split("::", 1)[0]
        callspec = getattr(item, "callspec", None)
        provider = callspec.params.get("provider") if callspec else None
        if module in FIRST_LEG_ONLY or provider in NOT_ORM_PROVIDERS:
            item.add_marker(mark)
