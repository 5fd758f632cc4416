"""`/store/v1/`'s own authentication and throttle (checkpoints.store_service.auth) and its
short path through the middleware (project.middleware), as a caller meets them."""

from __future__ import annotations

import time
import uuid

import pytest
from django.conf import settings
from django.contrib.auth.models import Permission, User
from django.db import connection
from django.test import Client, override_settings
from rest_framework.authtoken.models import Token

from checkpoints.remote.wire import CONTENT_TYPE, pack
from checkpoints.store_service import auth

LIMIT = 3


def address() -> str:
    """An address of this test's own, so no earlier count in the shared cache is in play."""
    return f"2001:db8::{uuid.uuid4().hex[:4]}:{uuid.uuid4().hex[:4]}"


def call(client: Client, key: str | None, name: str = "info", header: str = "x-api-key"):
    headers = {}
    if key is not None:
        headers = (
            {"HTTP_X_API_KEY": key}
            if header == "x-api-key"
            else {"HTTP_AUTHORIZATION": f"Token {key}"}
        )
    return client.post(f"/store/v1/{name}", pack({}), content_type=CONTENT_TYPE, **headers)


def code(response) -> str:
    return response.json()["error"]["code"]


@pytest.fixture(autouse=True)
def fresh_tokens():
    auth.forget_tokens()
    yield
    auth.forget_tokens()


@pytest.fixture
def key(db) -> str:
    user = User.objects.create_superuser("svc-keyholder", "", "pw")
    return Token.objects.create(user=user).key


@pytest.fixture
def limited():
    rates = {"checkpoints.token_failures": f"{LIMIT}/min"}
    with override_settings(
        REST_FRAMEWORK={**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}
    ):
        yield


@pytest.mark.parametrize("header", ["x-api-key", "authorization"])
def test_both_headers_authenticate_and_a_missing_key_is_401(key, header):
    client = Client(REMOTE_ADDR=address())
    assert call(client, key, header=header).status_code == 200
    refused = call(client, None)
    assert refused.status_code == 401 and code(refused) == "not_authenticated"
    assert refused["WWW-Authenticate"] == "Token"
    assert code(call(client, "nope", header=header)) == "authentication_failed"


@pytest.mark.usefixtures("limited")
def test_a_locked_out_address_is_refused_even_the_right_cached_key(key):
    guesser = Client(REMOTE_ADDR=address())
    assert call(guesser, key).status_code == 200  # the key is now cached in this process
    for attempt in range(LIMIT):
        assert call(guesser, f"wrong-{attempt}").status_code == 401, attempt
    for presented in ("wrong-again", key):
        refused = call(guesser, presented)
        assert refused.status_code == 429, refused.content
        assert code(refused) == "throttled"
        assert 0 < int(refused["Retry-After"]) <= 60
    # Another address is not locked out, and a right key never counts as a failure.
    other = Client(REMOTE_ADDR=address())
    for _ in range(LIMIT + 2):
        assert call(other, key).status_code == 200


@pytest.mark.usefixtures("limited")
def test_control_characters_and_an_empty_key_count_as_failures(key):
    guesser = Client(REMOTE_ADDR=address())
    assert code(call(guesser, "bad\x01key")) == "authentication_failed"
    assert code(call(guesser, "   ")) == "authentication_failed"
    assert code(call(guesser, "bad key", header="authorization")) == "authentication_failed"
    assert call(guesser, key).status_code == 429


def test_a_deleted_token_is_refused_at_once_in_this_process(key):
    client = Client(REMOTE_ADDR=address())
    assert call(client, key).status_code == 200
    Token.objects.filter(key=key).delete()
    refused = call(client, key)
    assert refused.status_code == 401 and code(refused) == "authentication_failed"


def test_a_deactivated_user_is_refused_at_once_in_this_process(key):
    client = Client(REMOTE_ADDR=address())
    assert call(client, key).status_code == 200
    user = Token.objects.get(key=key).user
    user.is_active = False
    user.save()
    refused = call(client, key)
    assert refused.status_code == 401 and "inactive" in refused.json()["error"]["message"]


@pytest.mark.django_db
def test_a_withdrawn_permission_is_seen_at_once_in_this_process():
    worker = User.objects.create_user("svc-worker")
    worker.user_permissions.add(
        Permission.objects.get(codename="store_worker_write", content_type__app_label="checkpoints")
    )
    key = Token.objects.create(user=worker).key
    client = Client(REMOTE_ADDR=address())
    assert call(client, key).status_code == 200
    cached = auth._token(key)[0]
    assert cached.has_perm("checkpoints.store_worker_write")
    worker.user_permissions.clear()
    fresh = auth._token(key)[0]
    assert fresh is not cached
    assert not fresh.has_perm("checkpoints.store_worker_write")


def test_a_token_deleted_elsewhere_is_refused_within_the_bound(key, monkeypatch):
    """A change this process is not told of (another process's, or SQL) takes at most
    TOKEN_SECONDS to reach it."""
    monkeypatch.setattr(auth, "TOKEN_SECONDS", 0.5)
    client = Client(REMOTE_ADDR=address())
    assert call(client, key).status_code == 200
    with connection.cursor() as cursor:  # no signal: as another process's delete
        cursor.execute("DELETE FROM authtoken_token WHERE key = %s", [key])
    assert call(client, key).status_code == 200  # still cached: the documented bound
    time.sleep(0.6)
    refused = call(client, key)
    assert refused.status_code == 401 and code(refused) == "authentication_failed"


def test_calls_are_throttled_per_token_with_retry_after(key, settings):
    settings.CHECKPOINTS = {**settings.CHECKPOINTS, "STORE_SERVICE_RATE": "2/min"}
    client = Client(REMOTE_ADDR=address())
    assert call(client, key).status_code == 200
    assert call(client, key).status_code == 200
    refused = call(client, key)
    assert refused.status_code == 429 and code(refused) == "throttled"
    assert 0 < int(refused["Retry-After"]) <= 60
    # Another user's token has a count of its own.
    other = Token.objects.create(user=User.objects.create_superuser("svc-other", "", "pw"))
    assert call(client, other.key).status_code == 200


def test_the_short_path_keeps_host_checks_and_security_headers(key):
    client = Client(REMOTE_ADDR=address())
    answered = call(client, key)
    assert answered.status_code == 200
    assert answered["X-Content-Type-Options"] == "nosniff"
    # No session, CSP or framing headers: those layers are not on this path.
    assert "Set-Cookie" not in answered and "Content-Security-Policy" not in answered
    with override_settings(ALLOWED_HOSTS=["store.example.com"]):
        refused = client.post(
            "/store/v1/info", pack({}), content_type=CONTENT_TYPE, HTTP_X_API_KEY=key
        )
        assert refused.status_code == 400
    # The rest of the service still passes the whole stack.
    page = client.get("/admin/login/")
    assert "Content-Security-Policy" in page and page["X-Frame-Options"] == "DENY"


def test_the_lockout_and_throttle_hold_when_the_caches_redis_goes_down(
    key,
    private_cache,
    settings,
):
    """Counted in Redis while it answers, then in the process (project.cache): never a 500,
    never a call let through uncounted."""
    settings.CHECKPOINTS = {**settings.CHECKPOINTS, "STORE_SERVICE_RATE": "3/min"}
    client = Client(REMOTE_ADDR=address())
    with override_settings(
        REST_FRAMEWORK={
            **settings.REST_FRAMEWORK,
            "DEFAULT_THROTTLE_RATES": {"checkpoints.token_failures": f"{LIMIT}/min"},
        }
    ):
        assert call(client, key).status_code == 200  # one round trip to Redis
        private_cache.stop()
        for _ in range(3):  # the process's own count starts afresh
            assert call(client, key).status_code == 200
        refused = call(client, key)
        assert refused.status_code == 429 and code(refused) == "throttled"
        guesser = Client(REMOTE_ADDR=address())
        for attempt in range(LIMIT):
            assert call(guesser, f"wrong-{attempt}").status_code == 401, attempt
        other = Token.objects.create(user=User.objects.create_superuser("svc-down", "", "pw"))
        assert call(guesser, other.key).status_code == 429


def test_the_short_path_serves_under_asgi(transactional_db):
    """The service runs under uvicorn: `StoreServicePath`'s async side, beside the stack's."""
    import asyncio

    import httpx
    from django.core.asgi import get_asgi_application

    user = User.objects.create_superuser("svc-asgi", "", "pw")
    key = Token.objects.create(user=user).key
    application = get_asgi_application()

    async def run():
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
            headers = {"content-type": CONTENT_TYPE, "x-api-key": key}
            answered = await client.post("/store/v1/info", content=pack({}), headers=headers)
            refused = await client.post(
                "/store/v1/info", content=pack({}), headers={**headers, "x-api-key": "nope"}
            )
            page = await client.get("/admin/login/")
        return answered, refused, page

    answered, refused, page = asyncio.run(run())
    assert answered.status_code == 200, answered.text
    assert answered.headers["content-type"] == CONTENT_TYPE
    assert "content-security-policy" not in answered.headers
    assert refused.status_code == 401
    assert refused.json()["error"]["code"] == "authentication_failed"
    assert page.status_code == 200 and "content-security-policy" in page.headers
