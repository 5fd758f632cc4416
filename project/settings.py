"""Django settings: every deployment choice comes from the environment."""

from __future__ import annotations

import os
from pathlib import Path

from checkpoints.dburl import parse_database_url

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = Path(os.environ.get("CHECKPOINTS_DATA_DIR", BASE_DIR / "var"))
# The embedded SQLite file lives here; a fresh clone has no such folder yet.
DATA_DIR.mkdir(parents=True, exist_ok=True)

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "dev-only-insecure-key-change-me")
DEBUG = os.environ.get("DJANGO_DEBUG", "1") == "1"
ALLOWED_HOSTS = [h for h in os.environ.get("DJANGO_ALLOWED_HOSTS", "*").split(",") if h]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "django_prometheus",
    "checkpoints.apps.CheckpointsConfig",
    "retention.apps.RetentionConfig",
]

MIDDLEWARE = [
    "django_prometheus.middleware.PrometheusBeforeMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_prometheus.middleware.PrometheusAfterMiddleware",
]

ROOT_URLCONF = "project.urls"
WSGI_APPLICATION = "project.wsgi.application"
ASGI_APPLICATION = "project.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": parse_database_url(os.environ["DATABASE_URL"])
    if os.environ.get("DATABASE_URL")
    else {"ENGINE": "django.db.backends.sqlite3", "NAME": str(DATA_DIR / "checkpoints.sqlite3")}
}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # WAL lets readers (admin, API) run while a graph writes; IMMEDIATE avoids
    # upgrade deadlocks between two writers.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "transaction_mode": "IMMEDIATE",
            "timeout": 20,
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
    )
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
CACHES = {
    "default": {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": REDIS_URL,
        "OPTIONS": {"CLIENT_CLASS": "django_redis.client.DefaultClient"},
    }
}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
STATIC_ROOT = DATA_DIR / "static"
LOGIN_URL = "/admin/login/"
DATA_UPLOAD_MAX_MEMORY_SIZE = int(os.environ.get("CHECKPOINTS_MAX_BODY_BYTES", 10 * 1024 * 1024))


def _env_number(name: str, default):
    """The variable's value as an int, None for 'null', else the raw text (checks refuse it)."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    text = raw.strip()
    if text.lower() in ("null", "none", "off"):
        return None
    try:
        return int(text)
    except ValueError:
        return text


CHECKPOINTS = {
    "PROVIDER": os.environ.get("LLM_PROVIDER_CHECKPOINT", "sqlite").strip().lower(),
    "CONN_STRING": os.environ.get("LLM_PROVIDER_CHECKPOINT_CONN_STRING") or None,
    "RETENTION_WAITING_MINUTES": _env_number(
        "LLM_PROVIDER_CHECKPOINT_RETENTION_WAITING_MINUTES", 10080
    ),
    "RETENTION_FINISHED_MINUTES": _env_number(
        "LLM_PROVIDER_CHECKPOINT_RETENTION_FINISHED_MINUTES", 1440
    ),
    "INLINE_COMPRESS_BYTES": _env_number("LLM_PROVIDER_CHECKPOINT_INLINE_COMPRESS_BYTES", 65536),
    "MAX_CHECKPOINTS": _env_number("CHECKPOINTS_MAX_CHECKPOINTS", 0),
    "PG_PREPARED_STATEMENTS": os.environ.get("CHECKPOINTS_PG_PREPARED_STATEMENTS", "auto"),
    "PG_POOL": os.environ.get("CHECKPOINTS_PG_POOL", "1") != "0",
    "SWEEP_LEASE_SECONDS": _env_number("CHECKPOINTS_SWEEP_LEASE_SECONDS", 60),
    "DURABILITY_RECHECK_SECONDS": _env_number("CHECKPOINTS_DURABILITY_RECHECK_SECONDS", 30),
    "PG_STANDBY_WAIT_SECONDS": _env_number("CHECKPOINTS_PG_STANDBY_WAIT_SECONDS", None),
    "ENCRYPTION_KEYS": [
        k.strip() for k in os.environ.get("CHECKPOINTS_ENCRYPTION_KEYS", "").split(",") if k.strip()
    ],
    "ENCRYPTION_STORE_ID": os.environ.get("CHECKPOINTS_ENCRYPTION_STORE_ID", ""),
    "ENCRYPTION_REQUIRE_BOUND": os.environ.get("CHECKPOINTS_ENCRYPTION_REQUIRE_BOUND", "0") == "1",
    "SWEEP_SCHEDULE": os.environ.get("CHECKPOINTS_SWEEP_SCHEDULE") or None,
    "SWEEP_BATCH_SIZE": _env_number("CHECKPOINTS_SWEEP_BATCH_SIZE", 1000),
    "SWEEP_BATCH_RETRIES": _env_number("CHECKPOINTS_SWEEP_BATCH_RETRIES", 3),
    "SWEEP_BATCH_RETRY_SECONDS": _env_number("CHECKPOINTS_SWEEP_BATCH_RETRY_SECONDS", 10),
    # Unset: LangGraph's own rule (permissive unless LANGGRAPH_STRICT_MSGPACK); a
    # comma-separated list of module.Class names: strict, those classes allowed.
    "ALLOWED_MSGPACK_MODULES": (
        [
            n.strip()
            for n in os.environ["CHECKPOINTS_ALLOWED_MSGPACK_MODULES"].split(",")
            if n.strip()
        ]
        if os.environ.get("CHECKPOINTS_ALLOWED_MSGPACK_MODULES") is not None
        else None
    ),
}

# Only the defaults for views of the service's own; the store's API views carry their own
# authentication, pagination, exception handler and schema class (a host project sets none).
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.TokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
}

CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", REDIS_URL)
CELERY_RESULT_BACKEND = os.environ.get("CELERY_RESULT_BACKEND", REDIS_URL)
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
}
