"""Django settings for a LangGraph-suite process (the upstream `tests` package shadows ours).

The project's settings, with this run's own PostgreSQL test database and SQLite file, so
several runs side by side never share state. Loaded by lgsuite_plugin, not by our tests.
"""

import os
import tempfile

os.environ.setdefault("CHECKPOINTS_DATA_DIR", tempfile.mkdtemp(prefix="checkpoint-store-lgsuite-"))

from checkpoints.dburl import parse_database_url  # noqa: E402
from project.settings import *  # noqa: E402,F403
from project.settings import CHECKPOINTS, DATABASES  # noqa: E402

RUN_TAG = os.environ.get("LGSUITE_RUN_TAG") or str(os.getpid())
POSTGRES_URL = os.environ.get(
    "CHECKPOINTS_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/checkpoint_store"
)
DATABASES["pg"] = parse_database_url(POSTGRES_URL)
DATABASES["pg"]["TEST"] = {"NAME": f"lgsuite_{RUN_TAG}"}
DATABASES["default"]["TEST"] = {
    "NAME": os.path.join(os.environ["CHECKPOINTS_DATA_DIR"], f"lgsuite_{RUN_TAG}.sqlite3")
}
CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
CHECKPOINTS = {**CHECKPOINTS, "PROVIDER": "sqlite", "CONN_STRING": None}
