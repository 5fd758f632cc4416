"""Production: scripts/serve.sh behind gunicorn (the admin's sign-in lockout, /metrics and the
static files over HTTP), the DEBUG=0 refusals, check --deploy, /health/ against stopped
private servers, throttles, the CSP header and JSON logs."""

from __future__ import annotations

import http.cookiejar
import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

import pytest
from django.test import override_settings

from tests.private_servers import RedisServer, free_port
from tests.reliability_fixtures import health
from tests.standalone import ROOT, service_env

SECRET = "test-only-" + "a1b2c3d4e5f6g7h8" * 4
PROD_ENV = {"DJANGO_DEBUG": "0", "DJANGO_SECRET_KEY": SECRET, "DJANGO_ALLOWED_HOSTS": "127.0.0.1"}


def manage(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def get(url: str, **headers: str):
    """(status, headers: case-insensitive as sent, body)."""
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read()


def json_formatter() -> logging.Formatter:
    """The service's JSON formatter, as its LOGGING builds it."""
    from project.settings import LOGGING

    options = dict(LOGGING["formatters"]["json"])
    return options.pop("()")(**options)


# --- the server ------------------------------------------------------------------------


def readme_production_blocks() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Production\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^```sh\n(.*?)^```$", section, flags=re.S | re.M)


@dataclass
class Production:
    """The running server: its address, the README's probe, its log, its environment."""

    base: str
    port: int
    probe: str
    log: Path
    env: dict[str, str]
    data: Path


ADMIN_PASSWORD = "prod-admin-" + "p4ss" * 5
METRICS_TOKEN = "scrape-" + "t0ken" * 8


@contextmanager
def serving(data: Path, serve: str, probe: str = "", **extra: str):
    """``serve`` (the README's commands) on a free port with the service's environment and
    ``extra``; yields the running server with an admin user made."""
    port = free_port()
    # The suite's own virtualenv (CI runs the suite in two).
    env = service_env(data, PORT=str(port), SERVE_SKIP_INSTALL="1", VENV=sys.prefix, **extra)
    log_path = data / "server.log"
    log = open(log_path, "w")  # noqa: SIM115 - the server writes it until stopped
    server = subprocess.Popen(
        ["bash", "-euo", "pipefail", "-c", serve],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            assert server.poll() is None, log_path.read_text()
            try:
                get(f"{base}/health/", Accept="application/json")
                break
            except OSError:
                time.sleep(0.5)
        made = manage(
            ["createsuperuser", "--no-input", "--username", "admin", "--email", "a@example.com"],
            {**env, "DJANGO_SUPERUSER_PASSWORD": ADMIN_PASSWORD},
        )
        assert made.returncode == 0, made.stderr[-2000:]
        yield Production(base, port, probe, log_path, env, data)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
        log.close()


@pytest.fixture(scope="module")
def production(tmp_path_factory):
    """The README's "Production" commands, as written, on a free port, with an admin user."""
    data = tmp_path_factory.mktemp("production")
    serve, probe = readme_production_blocks()
    assert serve.strip().endswith("bash scripts/serve.sh")
    # The manifest an earlier release left in STATIC_ROOT, where it was served.
    (data / "static").mkdir(exist_ok=True)
    (data / "static" / "staticfiles.json").write_text('{"paths": {}, "version": "1.1"}')
    with serving(data, serve, probe, CHECKPOINTS_METRICS_TOKEN=METRICS_TOKEN) as server:
        yield server


def test_serve_script_answers_the_admin_with_static_files_and_health(production):
    base = production.base
    probed = subprocess.run(
        ["bash", "-c", production.probe.replace(":8000/", f":{production.port}/")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    checks = json.loads(probed.stdout)
    assert set(checks.values()) == {"OK"}, checks
    assert any(name.startswith("StoreFormat(provider='sqlite')") for name in checks)
    assert any(name.startswith("PendingMigrations") for name in checks)
    status, headers, page = get(f"{base}/admin/login/")
    assert status == 200
    assert "script-src 'self'" in headers["Content-Security-Policy"]
    # collectstatic's hashed names, served by WhiteNoise with DEBUG off.
    css = re.search(rb'href="(/static/admin/css/base\.[0-9a-f]{12}\.css)"', page)
    assert css, page[:2000]
    status, headers, _ = get(base + css.group(1).decode())
    assert status == 200 and headers["Content-Type"].startswith("text/css")
    assert "immutable" in headers.get("Cache-Control", "")
    # Request lines are JSON, each with its request id.
    lines = [
        json.loads(line) for line in production.log.read_text().splitlines() if line.startswith("{")
    ]
    finished = [line for line in lines if line.get("event") == "request_finished"]
    assert finished and all(line.get("request_id") for line in finished), lines[-5:]


def test_the_static_manifest_is_not_served(production):
    """The manifest names every static file and its hash: not for the web."""
    for path in ("/static/staticfiles.json", "/static/staticfiles.json.gz"):
        status, _, body = get(production.base + path)
        assert status == 404, (path, body[:200])
    # It lives beside STATIC_ROOT, and the one an earlier release left there is gone.
    assert (
        "admin/css/base.css"
        in json.loads((production.data / "staticfiles.json").read_text())["paths"]
    )
    assert not (production.data / "static" / "staticfiles.json").exists()


class Browser:
    """A cookie-keeping HTTP client that signs in to the admin as a person would."""

    def __init__(self, base: str):
        self.base = base
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
        )

    def open(self, path: str, data: bytes | None = None, **headers: str):
        request = urllib.request.Request(self.base + path, data=data, headers=headers)
        try:
            with self.opener.open(request, timeout=10) as response:
                return response.status, response.url, response.headers, response.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.url, exc.headers, exc.read()

    def sign_in(self, password: str, **headers: str):
        _, _, _, form = self.open("/admin/login/")
        token = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', form).group(1)
        fields = {
            "csrfmiddlewaretoken": token.decode(),
            "username": "admin",
            "password": password,
            "next": "/admin/",
        }
        return self.open("/admin/login/?next=/admin/", urlencode(fields).encode(), **headers)


def test_wrong_passwords_lock_the_admin_sign_in_over_http(production):
    from django.conf import settings

    attacker = Browser(production.base)
    limit = settings.AXES_FAILURE_LIMIT
    for attempt in range(1, limit):
        # Each guess claims another address: the server does not take the client's word.
        status, url, _, page = attacker.sign_in(
            f"guess-{attempt}", **{"X-Forwarded-For": f"192.0.2.{attempt}"}
        )
        assert status == 200 and url.endswith("/admin/login/?next=/admin/"), (attempt, status)
        assert b"Please enter the correct username and password" in page
    status, _, headers, page = attacker.sign_in(f"guess-{limit}")
    assert status == 429, page[:500]
    assert b"Sign-in locked" in page and int(headers["Retry-After"]) > 0
    # The right password is refused while the lock holds.
    status, _, _, page = attacker.sign_in(ADMIN_PASSWORD)
    assert status == 429 and b"Sign-in locked" in page
    assert attacker.open("/admin/")[1].endswith("/admin/login/?next=/admin/")
    # The operator sees the failures, as the README says, and lifts the lock.
    listed = manage(["axes_list_attempts"], production.env)
    assert listed.returncode == 0 and "admin" in listed.stdout, listed.stderr[-2000:]
    assert "127.0.0.1" in listed.stdout
    lifted = manage(["axes_reset_username", "admin"], production.env)
    assert lifted.returncode == 0, lifted.stderr[-2000:]
    status, url, _, page = attacker.sign_in(ADMIN_PASSWORD)
    assert status == 200 and url == production.base + "/admin/", (status, url)
    assert b"Site administration" in page


def test_behind_a_named_proxy_each_client_is_locked_alone(tmp_path):
    """FORWARDED_ALLOW_IPS names the proxy: its X-Forwarded-For is then the client's address."""
    from django.conf import settings

    serve = readme_production_blocks()[0]
    with serving(tmp_path, serve, FORWARDED_ALLOW_IPS="127.0.0.1") as proxied:
        guesser, operator = Browser(proxied.base), Browser(proxied.base)
        for attempt in range(1, settings.AXES_FAILURE_LIMIT + 1):
            status, _, _, _ = guesser.sign_in(f"guess-{attempt}", **{"X-Forwarded-For": GUESSER})
        assert status == 429
        status, url, _, _ = operator.sign_in(ADMIN_PASSWORD, **{"X-Forwarded-For": OPERATOR})
        assert status == 200 and url == proxied.base + "/admin/", (status, url)
        listed = manage(["axes_list_attempts"], proxied.env).stdout
        assert GUESSER in listed and OPERATOR not in listed, listed


GUESSER, OPERATOR = "192.0.2.10", "198.51.100.20"


def test_metrics_need_the_bearer_token_over_http(production):
    metrics = production.base + "/metrics"
    status, headers, body = get(metrics)
    assert status == 401 and headers["WWW-Authenticate"].startswith("Bearer")
    assert b"CHECKPOINTS_METRICS_TOKEN" in body and b"django_http" not in body
    assert get(metrics, Authorization="Bearer wrong")[0] == 401
    status, _, body = get(metrics, Authorization=f"Bearer {METRICS_TOKEN}")
    assert status == 200 and b"# TYPE django_http_requests_latency" in body


@pytest.mark.parametrize(
    ("unset", "named"),
    [("DJANGO_SECRET_KEY", "DJANGO_SECRET_KEY"), ("DJANGO_ALLOWED_HOSTS", "DJANGO_ALLOWED_HOSTS")],
)
def test_debug_off_refuses_to_start_on_the_defaults(tmp_path, unset, named):
    env = service_env(tmp_path, **{k: v for k, v in PROD_ENV.items() if k != unset})
    done = manage(["check"], env)
    assert done.returncode != 0
    assert named in done.stderr.strip().splitlines()[-1], done.stderr[-2000:]


def test_debug_off_refuses_a_short_secret_key(tmp_path):
    done = manage(["check"], service_env(tmp_path, **{**PROD_ENV, "DJANGO_SECRET_KEY": "short"}))
    assert done.returncode != 0 and "DJANGO_SECRET_KEY" in done.stderr


def test_check_deploy_is_clean_with_the_documented_variables(tmp_path):
    env = service_env(tmp_path, **PROD_ENV, DJANGO_HTTPS="1")
    # As scripts/serve.sh starts: unapplied migrations and no static manifest are reported.
    for step in (["migrate"], ["collectstatic"]):
        assert manage([*step, "--no-input", "--verbosity", "0"], env).returncode == 0
    done = manage(["check", "--deploy", "--fail-level", "WARNING"], env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no issues" in done.stdout
    # Without them the warnings name what is missing.
    done = manage(
        ["check", "--deploy", "--fail-level", "WARNING"], service_env(tmp_path, **PROD_ENV)
    )
    assert done.returncode != 0 and "SECURE_SSL_REDIRECT" in done.stderr + done.stdout


# --- health ----------------------------------------------------------------------------


@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
def test_health_names_a_stopped_redis_store_then_recovers():
    from checkpoints.health import service_checks

    redis = RedisServer()
    redis.start()
    try:
        store = {"PROVIDER": "redis", "CONN_STRING": redis.url}
        caches = {
            "default": {
                "BACKEND": "django_redis.cache.RedisCache",
                "LOCATION": redis.url,
                "OPTIONS": {"CLIENT_CLASS": "django_redis.client.DefaultClient"},
            }
        }
        from django.conf import settings

        with override_settings(CHECKPOINTS={**settings.CHECKPOINTS, **store}, CACHES=caches):
            checks = service_checks(databases=["default"])
            status, body = health(checks)
            assert status == 200, body
            redis.stop()
            status, body = health(checks)
            assert status == 503, body
            failed = {name for name, result in body.items() if result != "OK"}
            assert "StoreFormat(provider='redis')" in failed, body
            assert f"Redis(db=0, host='127.0.0.1', port={redis.port})" in failed, body
            assert body["Database(alias='default')"] == "OK"
            redis.start()
            status, body = health(checks)
            assert status == 200, body
    finally:
        redis.stop()


PENDING_THEN_MIGRATED = """
import json
import django
django.setup()
from django.core.management import call_command
from django.test import Client

def probe():
    response = Client().get("/health/", HTTP_ACCEPT="application/json")
    return response.status_code, response.json()

print(json.dumps(probe()))
call_command("migrate", verbosity=0)
print(json.dumps(probe()))
"""


def test_health_fails_on_pending_migrations_until_migrate(tmp_path):
    (tmp_path / "probe.py").write_text(PENDING_THEN_MIGRATED)
    env = service_env(tmp_path, DJANGO_SETTINGS_MODULE="project.settings", PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, str(tmp_path / "probe.py")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (before, checks), (after, healed) = (json.loads(x) for x in done.stdout.splitlines()[-2:])
    assert before == 503, checks
    assert "not applied" in checks["PendingMigrations(alias='default')"], checks
    assert "manage.py migrate" in checks["PendingMigrations(alias='default')"]
    assert checks["Database(alias='default')"] == "OK"
    assert after == 200, healed


@pytest.mark.django_db(transaction=True)  # the probe reads on a thread of its own
def test_health_refuses_a_store_in_another_format_generation():
    from checkpoints.health import StoreFormat
    from checkpoints.models import StoreFormat as StoreFormatRow
    from checkpoints.store.planning import utcnow

    assert health([StoreFormat])[0] == 200
    StoreFormatRow.objects.create(generation=999, recorded_at=utcnow())
    status, body = health([StoreFormat])
    assert status == 503
    assert "format generation 999" in body["StoreFormat(provider='sqlite')"]


def test_health_names_a_celery_broker_that_does_not_answer():
    from celery import Celery

    from checkpoints.health import CeleryBroker

    redis = RedisServer()
    redis.start()
    try:
        app = Celery("health-probe", broker=redis.url)
        assert health([(CeleryBroker, {"app": app})])[0] == 200
        redis.stop()
        status, body = health([(CeleryBroker, {"app": app})])
        assert status == 503 and "Celery broker did not answer" in body["CeleryBroker()"], body
    finally:
        redis.stop()


def test_the_pins_say_what_ci_runs():
    import tomllib

    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert "django>=5.2,<6.1" in deps
    ci = (ROOT / ".ci" / "run").read_text()
    assert 'PIN="django>=6.0,<6.1"' in ci and "/root/.pyenv/versions/3.12." in ci


@pytest.mark.django_db
def test_health_url_answers_json(client):
    response = client.get("/health/", HTTP_ACCEPT="application/json")
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert "StoreFormat(provider='sqlite')" in body and "PendingMigrations(alias='default')" in body


# --- throttles -------------------------------------------------------------------------


RATES = {"DEFAULT_THROTTLE_RATES": {"checkpoints.sweep": "2/min", "checkpoints.delete": "1/min"}}


@pytest.mark.usefixtures("threads")
def test_destructive_calls_are_throttled_with_retry_after(clients):
    from django.conf import settings
    from django.core.cache import cache

    cache.clear()
    with override_settings(REST_FRAMEWORK={**settings.REST_FRAMEWORK, **RATES}):
        sweeper = clients["sweeper"]
        for _ in range(2):
            ok = sweeper.post("/api/checkpoints/sweep/", {"dry_run": True}, format="json")
            assert ok.status_code == 200, ok.content
        limited = sweeper.post("/api/checkpoints/sweep/", {"dry_run": True}, format="json")
        assert limited.status_code == 429, limited.content
        assert 0 < int(limited["Retry-After"]) <= 60
        assert limited.json()["error"]["code"] == "throttled"
        # Reads of the same view family are not limited; deletes have their own scope.
        for _ in range(3):
            assert clients["alice"].get("/api/threads/alice-1/").status_code == 200
        assert clients["alice"].delete("/api/threads/alice-1/").status_code == 204
        again = clients["alice"].delete("/api/threads/a%2Fb%20c%3F%25%23%C3%BC/")
        assert again.status_code == 429 and again["Retry-After"]
    cache.clear()


def test_the_service_sets_a_rate_for_every_destructive_scope():
    from checkpoints.api.views import BulkUpdateView, ForkView, RollbackView, ThreadDetailView
    from project import settings as service
    from retention.api import SweepView

    rates = service.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]
    for view in (SweepView, RollbackView, ForkView, BulkUpdateView, ThreadDetailView):
        assert rates[view.throttle_scope], view


# --- CSP and logs ----------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("page", ["/admin/login/", "/api/docs/"])
def test_admin_and_docs_pages_carry_a_csp(client, page):
    response = client.get(page)
    assert response.status_code == 200
    policy = response["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "default-src 'self'" in policy
    assert b"<script>" not in response.content  # no inline script for the policy to block


@contextmanager
def request_lines():
    """The ``request_finished`` events django-structlog logs meanwhile, as the service's JSON
    formatter renders them (the list fills when the block ends)."""
    formatter = json_formatter()
    lines: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(formatter.format(record))
    logger = logging.getLogger("django_structlog")
    logger.addHandler(handler)
    finished: list[dict] = []
    try:
        yield finished
    finally:
        logger.removeHandler(handler)
        events = [json.loads(line) for line in lines]
        finished.extend(e for e in events if e["event"] == "request_finished")


@pytest.mark.django_db
def test_a_request_logs_a_json_line_with_its_request_id(client):
    with request_lines() as finished:
        client.get("/health/", HTTP_ACCEPT="application/json")
    assert finished and re.fullmatch(r"[0-9a-f-]{36}", finished[0]["request_id"]), finished
    assert finished[0]["level"] in ("info", "error") and "timestamp" in finished[0]


@pytest.mark.django_db
def test_a_request_line_names_the_servers_address_not_a_forwarded_for(client):
    with request_lines() as finished:
        client.get(
            "/health/",
            HTTP_ACCEPT="application/json",
            REMOTE_ADDR="203.0.113.4",
            HTTP_X_FORWARDED_FOR="192.0.2.1",
        )
    assert finished and finished[0]["ip"] == "203.0.113.4", finished


@pytest.mark.django_db
def test_a_signed_in_request_logs_its_user_id(client, django_user_model):
    user = django_user_model.objects.create_user("logged", password="pw")
    client.force_login(user)
    with request_lines() as finished:
        client.get("/health/", HTTP_ACCEPT="application/json")
    assert finished and finished[0]["user_id"] == user.pk, finished
    assert "thread_id" not in finished[0]  # no thread in play


@pytest.mark.django_db
def test_a_request_on_a_thread_logs_its_thread_id(client, django_user_model):
    client.force_login(django_user_model.objects.create_user("reader", password="pw"))
    with request_lines() as finished:
        # A thread the user may not see: a 404, and the line still says which thread.
        assert client.get("/api/threads/chat%2F42/state/").status_code == 404
        assert client.get("/langgraph/threads/chat-43").status_code in (401, 404)
    assert [e.get("thread_id") for e in finished] == ["chat/42", "chat-43"], finished


@pytest.mark.django_db(transaction=True)
def test_the_sweeps_spared_warning_is_a_json_line_with_the_thread_id(caplog):
    from datetime import timedelta

    from checkpoints.demo import build_demo_graph
    from checkpoints.store.planning import utcnow
    from checkpoints.store.registry import get_saver
    from retention.runs import mark_finished
    from retention.sweep import sweep_checkpoints
    from tests.api_fixtures import run_demo

    saver = get_saver()
    run_demo("spared-1", None)
    mark_finished(saver, "spared-1", now=utcnow() - timedelta(days=3))
    # Written since it was marked: the sweep spares it.
    build_demo_graph(saver).invoke({"topic": "again"}, {"configurable": {"thread_id": "spared-1"}})
    with caplog.at_level(logging.WARNING, logger="retention.sweep"):
        result = sweep_checkpoints(saver=saver, now=utcnow())
    assert [s["thread_id"] for s in result.spared] == ["spared-1"]
    formatter = json_formatter()
    (record,) = [r for r in caplog.records if "spared thread" in r.getMessage()]
    text = formatter.format(record)
    line = json.loads(text)
    assert line["thread_id"] == "spared-1" and line["level"] == "warning"
    assert line["horizon"] == "finished" and "spared thread 'spared-1'" in line["event"]


# --- dependencies ----------------------------------------------------------------------


@pytest.mark.django_db
def test_one_rule_turns_a_conn_string_into_a_database_alias(tmp_path, monkeypatch):
    from django.db import connections

    from checkpoints.connect import alias_for_conn_string, database_alias

    # A URL naming a configured database is that database, not a second connection to it.
    default = connections.settings["default"]["NAME"]
    assert alias_for_conn_string(f"sqlite:///{default}") == "default"
    monkeypatch.chdir(tmp_path)
    alias = alias_for_conn_string("sqlite:///relative-store.sqlite3")
    assert alias == database_alias("sqlite:///relative-store.sqlite3")[0]
    entry = connections.settings[alias]
    # The same file whatever the working directory later, and the store's SQLite options.
    assert entry["NAME"] == str(tmp_path / "relative-store.sqlite3")
    assert entry["OPTIONS"]["transaction_mode"] == "IMMEDIATE"
