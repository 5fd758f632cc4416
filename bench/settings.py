"""Benchmark settings: the project's, on bench-only databases, with query logging off."""

import os

from project.settings import *  # noqa: F403
from project.settings import BASE_DIR, CHECKPOINTS, DATABASES

BENCH_DIR = os.environ.get("CHECKPOINTS_BENCH_DIR", str(BASE_DIR / "var" / "bench"))
PG_HOST = os.environ.get("CHECKPOINTS_BENCH_PG_HOST", "127.0.0.1")
PG_PORT = int(os.environ.get("CHECKPOINTS_BENCH_PG_PORT", "5432"))
PG_USER = os.environ.get("CHECKPOINTS_BENCH_PG_USER", "postgres")
PG_DB = "checkpoint_bench"
PG_DB_LG = "checkpoint_bench_lg"
PG_DB_SWEEP = "checkpoint_bench_sweep"
REDIS_BENCH_URL = os.environ.get("CHECKPOINTS_BENCH_REDIS_URL", "redis://127.0.0.1:6379/13")

# DEBUG keeps every SQL statement in memory; a benchmark must not pay for that.
DEBUG = False

DATABASES["default"] = {
    "ENGINE": "django.db.backends.sqlite3",
    "NAME": os.path.join(BENCH_DIR, "ours.sqlite3"),
    "OPTIONS": {
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
        # Both SQLite savers at synchronous=FULL (issue 35), the project's default.
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;",
    },
}
DATABASES["pg"] = {
    "ENGINE": "django.db.backends.postgresql",
    "NAME": PG_DB,
    "USER": PG_USER,
    "HOST": PG_HOST,
    "PORT": PG_PORT,
}
DATABASES["pgsweep"] = {**DATABASES["pg"], "NAME": PG_DB_SWEEP}
CHECKPOINTS = {**CHECKPOINTS, "PROVIDER": "sqlite", "CONN_STRING": None}
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": "WARNING"},
}
