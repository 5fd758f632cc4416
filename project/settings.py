"""Django settings: every deployment choice comes from the environment."""

from __future__ import annotations

import ipaddress
import os
import re
import warnings
from datetime import timedelta
from pathlib import Path

import django
from corsheaders.defaults import default_headers as cors_default_headers
from django.core.exceptions import ImproperlyConfigured

from checkpoints.dburl import parse_database_url
from checkpoints.graph_sources import GRAPHS_ENV, graphs_from_env
from checkpoints.langgraph_api.pagination import EXPOSED as LANGGRAPH_EXPOSED_HEADERS

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = Path(os.environ.get("CHECKPOINTS_DATA_DIR", BASE_DIR / "var"))
# The embedded SQLite file lives here; a fresh clone has no such folder yet, and the
# entrances make it (project.startup.prepare): importing the settings writes nothing.

DEV_SECRET_KEY = "dev-only-insecure-key-change-me"
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", DEV_SECRET_KEY)
DEBUG = os.environ.get("DJANGO_DEBUG", "1") == "1"
ALLOWED_HOSTS = [h for h in os.environ.get("DJANGO_ALLOWED_HOSTS", "*").split(",") if h]
if not DEBUG:
    # A production process refuses to start on the demo's defaults rather than run with them.
    if (
        SECRET_KEY == DEV_SECRET_KEY
        or len(SECRET_KEY) < 50
        or len(set(SECRET_KEY)) < 5
        or SECRET_KEY.startswith("django-insecure-")
    ):
        raise ImproperlyConfigured(
            "DJANGO_SECRET_KEY must be set to a secret of your own (50 or more random "
            "characters) when DJANGO_DEBUG=0; make one with: python -c 'import secrets; "
            "print(secrets.token_urlsafe(50))'"
        )
    if not os.environ.get("DJANGO_ALLOWED_HOSTS", "").strip():
        raise ImproperlyConfigured(
            "DJANGO_ALLOWED_HOSTS must name the host names this service answers to "
            "(comma-separated, e.g. checkpoints.example.com) when DJANGO_DEBUG=0"
        )


def _env_count(name: str, default: int) -> int:
    """The variable as a whole number of 1 or more; ImproperlyConfigured names it otherwise."""
    raw = os.environ.get(name, "").strip() or str(default)
    if not raw.isdigit() or int(raw) < 1:
        raise ImproperlyConfigured(f"{name} must be a whole number of 1 or more, not {raw!r}")
    return int(raw)


CSRF_TRUSTED_ORIGINS = [
    o for o in os.environ.get("DJANGO_CSRF_TRUSTED_ORIGINS", "").split(",") if o.strip()
]
# CORS for browser clients of the LangGraph API (LangGraph Studio, a web app): off unless
# CHECKPOINTS_CORS_ORIGINS lists origins (comma-separated, e.g. https://smith.langchain.com).
# No cookies cross: a browser client authenticates as the SDK does, with x-api-key. A
# preflight answers 200 without credentials, and says yes to Chrome's Private Network
# Access question for a listed origin (a public page calling a server on localhost).
CORS_ALLOWED_ORIGINS = [
    o.strip().rstrip("/")
    for o in os.environ.get("CHECKPOINTS_CORS_ORIGINS", "").split(",")
    if o.strip()
]
CORS_URLS_REGEX = r"^/langgraph/"
CORS_ALLOW_CREDENTIALS = False
CORS_ALLOW_PRIVATE_NETWORK = True
CORS_ALLOW_HEADERS = (*cors_default_headers, "x-api-key")
CORS_EXPOSE_HEADERS = list(LANGGRAPH_EXPOSED_HEADERS)
# Behind a TLS-terminating proxy: redirect to https, secure cookies, HSTS. The proxy must set
# X-Forwarded-Proto (and strip a client's own); /health/ answers plain http for probes.
if os.environ.get("DJANGO_HTTPS", "0") == "1":
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = True
    SECURE_REDIRECT_EXEMPT = [r"^health/"]
    SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = int(os.environ.get("DJANGO_HSTS_SECONDS", 31536000))
    SECURE_HSTS_INCLUDE_SUBDOMAINS = os.environ.get("DJANGO_HSTS_INCLUDE_SUBDOMAINS", "1") == "1"
    SECURE_HSTS_PRELOAD = os.environ.get("DJANGO_HSTS_PRELOAD", "1") == "1"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "axes",
    "corsheaders",
    "rest_framework",
    "rest_framework.authtoken",
    "django_prometheus",
    "health_check",
    "django_structlog",
    "checkpoints.apps.CheckpointsConfig",
    "retention.apps.RetentionConfig",
    "checkpoints.langgraph_api.apps.LangGraphApiConfig",
    "project.apps.ServiceConfig",
]

MIDDLEWARE = [
    # /store/v1/ (the remote saver's calls) on a short chain of its own (project.middleware).
    "project.middleware.StoreServicePath",
    "django_prometheus.middleware.PrometheusBeforeMiddleware",
    # Before anything that answers: a preflight gets its CORS answer here, unauthenticated.
    "corsheaders.middleware.CorsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Django 6 has its own CSP middleware; on 5.2 django-csp's reads CONTENT_SECURITY_POLICY.
    "django.middleware.csp.ContentSecurityPolicyMiddleware"
    if django.VERSION >= (6, 0)
    else "csp.middleware.CSPMiddleware",
    "django_structlog.middlewares.RequestMiddleware",
    "django_prometheus.middleware.PrometheusAfterMiddleware",
    # Last, as django-axes asks: it turns a locked-out sign-in into the lockout page.
    "axes.middleware.AxesMiddleware",
]

# The admin, the console and Swagger UI run no inline script and load nothing from elsewhere;
# inline styles stay allowed (the admin's templates and Swagger UI set them).
CSP_DIRECTIVES = {
    "default-src": ["'self'"],
    "script-src": ["'self'"],
    "style-src": ["'self'", "'unsafe-inline'"],
    "img-src": ["'self'", "data:"],
    "font-src": ["'self'", "data:"],
    "connect-src": ["'self'"],
    "object-src": ["'none'"],
    "base-uri": ["'self'"],
    "form-action": ["'self'"],
    "frame-ancestors": ["'self'"],
}
if django.VERSION >= (6, 0):
    SECURE_CSP = CSP_DIRECTIVES
else:
    CONTENT_SECURITY_POLICY = {"DIRECTIVES": CSP_DIRECTIVES}

ROOT_URLCONF = "project.urls"
WSGI_APPLICATION = "project.wsgi.application"
ASGI_APPLICATION = "project.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        # The service's own overrides (the admin's name and index); the apps keep theirs.
        "DIRS": [BASE_DIR / "templates"],
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
            # synchronous comes from CHECKPOINTS["SQLITE_SYNCHRONOUS"]
            # (checkpoints.store.sqlite.connection).
            "init_command": "PRAGMA journal_mode=WAL;",
        }
    )


def _env_pool_size(name: str, default: int) -> int:
    """The variable as a whole number of 0 or more (0: no pool); ImproperlyConfigured names
    it otherwise."""
    raw = os.environ.get(name, "").strip() or str(default)
    if not raw.isdigit():
        raise ImproperlyConfigured(
            f"{name} must be a whole number of connections (0 turns the pool off), not {raw!r}"
        )
    return int(raw)


# Django's own pool (5.1+) on a PostgreSQL default database, for the server processes
# (project.startup.pool_connections, from project/asgi.py and wsgi.py): without it an ASGI
# worker runs each request's sync view on a fresh thread, so with CONN_MAX_AGE 0 every
# request opened and closed a PostgreSQL connection (the token and owner queries): one
# backend start per call and one connection per request in flight beside the store's pool.
# Management commands connect directly, so a wrong DATABASE_URL is the driver's own error at
# once, not a pool's timeout. Its own variable, not a DATABASE_URL parameter: DATABASE_URL
# is handed on to child processes and tools that read it as libpq does, and the size sits
# next to the store pool's CHECKPOINTS_PG_POOL_SIZE (8), with which an operator sizes
# (store pool + this) x processes: 2 keeps two processes within 20.
DATABASE_POOL_SIZE = _env_pool_size("DATABASE_POOL_SIZE", 2)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
# Redis, or this process's memory while Redis does not answer (project.cache): throttles
# and lockouts keep counting, never a 500 and never let through uncounted.
CACHES = {
    "default": {
        "BACKEND": "project.cache.RedisWithLocalFallback",
        "LOCATION": REDIS_URL,
        "OPTIONS": {"CLIENT_CLASS": "django_redis.client.DefaultClient"},
    }
}

# Sign-in lockout (django-axes): after CHECKPOINTS_LOGIN_FAILURE_LIMIT wrong passwords for one
# user name from one address, that pair is refused (429, the right password too) for
# CHECKPOINTS_LOGIN_COOLOFF_MINUTES, and every further try restarts the wait. Keyed on the pair
# so a guesser locks out only their own address: the operator still signs in from theirs.
# Each failure is an Access attempt / Access failure in the admin; `manage.py axes_reset`
# (or axes_reset_username NAME, axes_reset_ip ADDRESS) lifts locks early.
AUTHENTICATION_BACKENDS = [
    "project.auth.LoginLockoutBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = _env_count("CHECKPOINTS_LOGIN_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = timedelta(minutes=_env_count("CHECKPOINTS_LOGIN_COOLOFF_MINUTES", 15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_ENABLE_ACCESS_FAILURE_LOG = True
AXES_LOCKOUT_CALLABLE = "project.auth.lockout_response"
AXES_USERNAME_CALLABLE = "project.auth.lockout_username"
# The address the server gives (REMOTE_ADDR), as the audit trail and the token limit read it;
# behind a proxy the server rewrites it from X-Forwarded-For only for FORWARDED_ALLOW_IPS.
AXES_CLIENT_IP_CALLABLE = "checkpoints.audit.client_address"
# django-structlog's "ip" in the request lines: the same address, not a client's own header.
IPWARE_META_PRECEDENCE_ORDER = ("REMOTE_ADDR",)

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LANGUAGE_CODE = "en-us"
# One date format across the console (project/formats/en/formats.py).
FORMAT_MODULE_PATH = ["project.formats"]
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
STATIC_ROOT = DATA_DIR / "static"
# Before collectstatic there is none, and WhiteNoise warns at every start; the system check
# checkpoints.W050/E050 says what to run instead, once.
warnings.filterwarnings("ignore", message=f"No directory at: {re.escape(str(STATIC_ROOT))}")
# WhiteNoise serves STATIC_ROOT; in production with hashed, compressed names (collectstatic),
# the manifest of those names kept out of STATIC_ROOT (project.storage).
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if DEBUG
        else "project.storage.ManifestOutsideStaticRoot"
    },
}
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
    "SQLITE_SYNCHRONOUS": os.environ.get("CHECKPOINTS_SQLITE_SYNCHRONOUS", "FULL").strip().upper(),
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
    # A langgraph.json's path, or name=pkg.module:graph pairs (checkpoints.graph_sources).
    "GRAPHS": graphs_from_env(os.environ.get(GRAPHS_ENV)),
    # The deployment that runs those graphs: the console's resume calls name it.
    "GRAPH_SERVER_URL": os.environ.get("CHECKPOINTS_GRAPH_SERVER_URL", "").strip() or None,
}


def _env_rate(name: str, default: str) -> str | None:
    """A throttle rate such as "30/min"; None for off; ImproperlyConfigured names a bad one."""
    rate = os.environ.get(name, default).strip()
    if rate.lower() in ("off", "none", ""):
        return None
    if not re.fullmatch(r"[1-9][0-9]*/[smhd][a-z]*", rate):
        raise ImproperlyConfigured(
            f"{name} must be a rate such as 30/min (a count per s, min, hour or day) "
            f"or off, not {rate!r}"
        )
    return rate


# Only the defaults for views of the service's own; the store's API views carry their own
# authentication, pagination, exception handler and schema class (a host project sets none).
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        # The store's token class (the schema view uses these): no NUL reaches the database,
        # and failed keys count against the caller's address (checkpoints.lockout).
        "checkpoints.api.limits.StrictTokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # Per caller, for the API's destructive calls (checkpoints.api.throttles), and failed token /
    # x-api-key authentications per client address (checkpoints.lockout); "off" lifts one.
    "DEFAULT_THROTTLE_RATES": {
        "checkpoints.sweep": _env_rate("CHECKPOINTS_THROTTLE_SWEEP", "6/min"),
        "checkpoints.rollback": _env_rate("CHECKPOINTS_THROTTLE_ROLLBACK", "30/min"),
        "checkpoints.fork": _env_rate("CHECKPOINTS_THROTTLE_FORK", "30/min"),
        "checkpoints.bulk_update": _env_rate("CHECKPOINTS_THROTTLE_BULK_UPDATE", "30/min"),
        "checkpoints.delete": _env_rate("CHECKPOINTS_THROTTLE_DELETE", "60/min"),
        "checkpoints.token_failures": _env_rate("CHECKPOINTS_THROTTLE_TOKEN_FAILURES", "30/min"),
    },
}


def _env_networks(name: str, default: str) -> list[str] | None:
    """Comma-separated addresses or networks; None for "*" (any address)."""
    text = os.environ.get(name, default).strip()
    if text == "*":
        return None
    networks = [item.strip() for item in text.split(",") if item.strip()]
    for network in networks:
        try:
            ipaddress.ip_network(network, strict=False)
        except ValueError:
            raise ImproperlyConfigured(
                f"{name}: {network!r} is not an address or network (e.g. 10.0.0.5, "
                "10.0.0.0/8, ::1), nor * for any address"
            ) from None
    return networks


# /metrics (project.metrics): served to the addresses in CHECKPOINTS_METRICS_ALLOW, and with
# CHECKPOINTS_METRICS_TOKEN set, only to a scrape sending "Authorization: Bearer <token>".
# The default allows loopback only, or any address once a token is set.
METRICS_TOKEN = os.environ.get("CHECKPOINTS_METRICS_TOKEN", "").strip()
METRICS_ALLOW = _env_networks(
    "CHECKPOINTS_METRICS_ALLOW", "*" if METRICS_TOKEN else "127.0.0.1,::1"
)

CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", REDIS_URL)
CELERY_RESULT_BACKEND = os.environ.get("CELERY_RESULT_BACKEND", REDIS_URL)
# /health/ checks the broker and a worker's answer when Celery is in use (a broker named, or
# the sweep scheduled); CHECKPOINTS_HEALTH_CELERY=0/1 says so outright.
HEALTH_CHECK_CELERY = (
    os.environ.get(
        "CHECKPOINTS_HEALTH_CELERY",
        "1" if os.environ.get("CELERY_BROKER_URL") or CHECKPOINTS["SWEEP_SCHEDULE"] else "0",
    )
    == "1"
)
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]

# The apps log with the stdlib; here the service renders every record as one JSON line (or
# console text with DJANGO_LOG_FORMAT=console), with django-structlog's request_id, user_id
# and a record's own fields (the sweep's thread_id).
import structlog  # noqa: E402

_LOG_CHAIN = [
    structlog.contextvars.merge_contextvars,
    structlog.stdlib.add_logger_name,
    structlog.stdlib.add_log_level,
    structlog.processors.TimeStamper(fmt="iso", utc=True),
]
LOG_FORMAT = os.environ.get("DJANGO_LOG_FORMAT", "json").strip().lower()
if LOG_FORMAT not in ("json", "console"):
    raise ImproperlyConfigured(f"DJANGO_LOG_FORMAT must be json or console, not {LOG_FORMAT!r}")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "json": {
            "()": structlog.stdlib.ProcessorFormatter,
            "foreign_pre_chain": [*_LOG_CHAIN, structlog.stdlib.ExtraAdder()],
            "processors": [
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,
                structlog.processors.JSONRenderer(),
            ],
        },
        "console": {
            "()": structlog.stdlib.ProcessorFormatter,
            "foreign_pre_chain": [*_LOG_CHAIN, structlog.stdlib.ExtraAdder()],
            "processors": [
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.dev.ConsoleRenderer(colors=False),
            ],
        },
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": LOG_FORMAT}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    # django-axes announces itself at every start; its sign-in failures are warnings.
    "loggers": {"axes.apps": {"level": "WARNING"}},
}
structlog.configure(
    processors=[*_LOG_CHAIN, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
    logger_factory=structlog.stdlib.LoggerFactory(),
    wrapper_class=structlog.stdlib.BoundLogger,
    cache_logger_on_first_use=True,
)
