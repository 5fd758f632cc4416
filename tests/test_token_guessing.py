"""Guessing API keys: failed token authentications per address are capped (checkpoints.lockout),
on /api (Authorization: Token) and /langgraph (x-api-key), as an attacker would send them."""

from __future__ import annotations

import subprocess
import sys
import uuid

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client, override_settings
from rest_framework.authtoken.models import Token

from tests.standalone import ROOT, service_env

LIMIT = 3
RATES = {"checkpoints.token_failures": f"{LIMIT}/min"}


@pytest.fixture
def key(db) -> str:
    user = User.objects.create_user("keyholder", password="pw")
    return Token.objects.create(user=user).key


@pytest.fixture
def limited():
    with override_settings(
        REST_FRAMEWORK={**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": RATES}
    ):
        yield


def address() -> str:
    """An address of this test's own, so no earlier count in the shared cache is in play."""
    return f"2001:db8::{uuid.uuid4().hex[:4]}:{uuid.uuid4().hex[:4]}"


def api(client: Client, key: str):
    return client.get("/api/threads/", HTTP_AUTHORIZATION=f"Token {key}")


def langgraph(client: Client, key: str):
    return client.post("/langgraph/threads/search", {}, "application/json", HTTP_X_API_KEY=key)


@pytest.mark.usefixtures("limited")
@pytest.mark.parametrize("call", [api, langgraph], ids=["api-token", "langgraph-x-api-key"])
def test_wrong_keys_past_the_limit_are_refused_with_retry_after(key, call):
    guesser = Client(REMOTE_ADDR=address())
    for attempt in range(LIMIT):
        assert call(guesser, f"wrong-{attempt}").status_code == 401, attempt
    refused = call(guesser, "wrong-again")
    assert refused.status_code == 429, refused.content
    assert 0 < int(refused["Retry-After"]) <= 60
    body = refused.json()
    message = body["error"]["message"] if "error" in body else body["detail"]
    code = body["error"]["code"] if "error" in body else body["code"]
    assert code == "throttled" and "failed token authentications" in message, body
    # The right key from that address is refused too: the answer must not tell a hit.
    assert call(guesser, key).status_code == 429
    # Another address is not held, nor is a signed-in session from the guessing one.
    assert call(Client(REMOTE_ADDR=address()), key).status_code == 200
    session = Client(REMOTE_ADDR=guesser.defaults["REMOTE_ADDR"])
    session.force_login(User.objects.get(username="keyholder"))
    assert session.get("/api/threads/").status_code == 200


@pytest.mark.usefixtures("limited")
def test_one_count_covers_both_headers_and_both_apis(key):
    guesser = Client(REMOTE_ADDR=address())
    assert api(guesser, "wrong-1").status_code == 401
    assert langgraph(guesser, "wrong-2").status_code == 401
    assert (
        guesser.get("/langgraph/threads/x", HTTP_AUTHORIZATION="Token wrong-3").status_code == 401
    )
    assert langgraph(guesser, key).status_code == 429
    assert api(guesser, key).status_code == 429


@pytest.mark.usefixtures("limited")
def test_the_schema_view_counts_wrong_keys_too(key):
    """The service's own DRF views (the schema) take tokens through the same class."""
    guesser = Client(REMOTE_ADDR=address())
    for _ in range(LIMIT):
        response = guesser.get("/api/schema/", HTTP_AUTHORIZATION="Token wrong")
        # 403: session authentication comes first there, and it names no scheme to retry.
        assert response.status_code == 403
    assert guesser.get("/api/schema/", HTTP_AUTHORIZATION=f"Token {key}").status_code == 429
    nul = Client(REMOTE_ADDR=address()).get("/api/schema/", HTTP_AUTHORIZATION="Token a\x00b")
    assert nul.status_code == 403 and b"printable ASCII" in nul.content


@pytest.mark.usefixtures("limited")
def test_control_characters_in_a_key_count_as_failures(key):
    guesser = Client(REMOTE_ADDR=address())
    for _ in range(LIMIT):
        assert api(guesser, "bad\x7fkey").status_code == 401
    assert api(guesser, key).status_code == 429


@pytest.mark.usefixtures("limited")
def test_right_keys_do_not_count(key):
    caller = Client(REMOTE_ADDR=address())
    for _ in range(LIMIT * 3):
        assert api(caller, key).status_code == 200


def test_no_rate_for_the_scope_means_no_limit(key):
    assert "checkpoints.token_failures" not in settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]
    guesser = Client(REMOTE_ADDR=address())
    for attempt in range(LIMIT * 3):
        assert api(guesser, f"wrong-{attempt}").status_code == 401
    assert api(guesser, key).status_code == 200


def test_the_service_limits_token_failures_by_default():
    from project import settings as service

    assert (
        service.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]["checkpoints.token_failures"] == "30/min"
    )


@pytest.mark.parametrize("rate", ["thirty/min", "30", "0/min", "30/fortnight"])
def test_the_service_refuses_a_malformed_rate_at_start(tmp_path, rate):
    done = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env=service_env(tmp_path, CHECKPOINTS_THROTTLE_TOKEN_FAILURES=rate),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert "CHECKPOINTS_THROTTLE_TOKEN_FAILURES must be a rate" in done.stderr, done.stderr[-2000:]


def test_a_host_rate_that_does_not_parse_is_named():
    from checkpoints.errors import CheckpointConfigError
    from checkpoints.lockout import parse_rate

    assert parse_rate("30/min") == (30, 60) and parse_rate("5/hour") == (5, 3600)
    for rate in ("thirty/min", "0/min", "30/fortnight"):
        with pytest.raises(CheckpointConfigError, match="checkpoints.token_failures"):
            parse_rate(rate)
