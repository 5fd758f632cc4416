"""/metrics answers only the addresses and the bearer token the operator names (project.metrics)."""

from __future__ import annotations

import subprocess

import pytest
from django.test import Client, override_settings

from tests.standalone import service_setting

TOKEN = "scrape-" + "k3y" * 12
PROMETHEUS_TEXT = b"# TYPE django_http_exceptions_total_by_view_total counter"


def scrape(address: str = "127.0.0.1", **headers):
    return Client(REMOTE_ADDR=address).get("/metrics", **headers)


def assert_served(response):
    assert response.status_code == 200, response.content[:300]
    assert PROMETHEUS_TEXT in response.content


@pytest.mark.django_db
def test_by_default_only_loopback_is_served():
    assert_served(scrape("127.0.0.1"))
    assert_served(scrape("::1"))
    refused = scrape("203.0.113.9")
    assert refused.status_code == 403
    error = refused.json()["error"]
    assert error["code"] == "permission_denied"
    assert "203.0.113.9" in error["message"] and "CHECKPOINTS_METRICS_ALLOW" in error["message"]
    assert PROMETHEUS_TEXT not in refused.content
    # A forwarded-for header is the client's word, not its address.
    assert scrape("203.0.113.9", HTTP_X_FORWARDED_FOR="127.0.0.1").status_code == 403


@pytest.mark.django_db
@override_settings(METRICS_ALLOW=["10.0.0.0/8", "192.0.2.7"], METRICS_TOKEN="")
def test_an_allow_list_of_networks_and_addresses():
    assert_served(scrape("10.20.30.40"))
    assert_served(scrape("192.0.2.7"))
    assert scrape("192.0.2.8").status_code == 403
    assert scrape("127.0.0.1").status_code == 403


@pytest.mark.django_db
@override_settings(METRICS_ALLOW=None, METRICS_TOKEN=TOKEN)
def test_with_a_token_prometheus_must_send_it_as_bearer():
    assert_served(scrape("203.0.113.9", HTTP_AUTHORIZATION=f"Bearer {TOKEN}"))
    assert_served(scrape("203.0.113.9", HTTP_AUTHORIZATION=f"bearer {TOKEN}"))
    for header in (None, "Bearer wrong", f"Token {TOKEN}", f"Bearer {TOKEN}x", "Bearer", "ü"):
        extra = {"HTTP_AUTHORIZATION": header} if header is not None else {}
        refused = scrape("203.0.113.9", **extra)
        assert refused.status_code == 401, header
        assert refused["WWW-Authenticate"].startswith("Bearer")
        assert "CHECKPOINTS_METRICS_TOKEN" in refused.json()["error"]["message"]
    # Loopback needs it too once a token is set.
    assert scrape("127.0.0.1").status_code == 401


@pytest.mark.django_db
@override_settings(METRICS_ALLOW=["192.0.2.0/24"], METRICS_TOKEN=TOKEN)
def test_a_token_and_an_allow_list_both_apply():
    assert_served(scrape("192.0.2.5", HTTP_AUTHORIZATION=f"Bearer {TOKEN}"))
    assert scrape("198.51.100.5", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 403
    assert scrape("192.0.2.5").status_code == 401


def settings_of(tmp_path, **env) -> subprocess.CompletedProcess:
    """``manage.py shell`` printing METRICS_ALLOW, with the service's environment and ``env``."""
    return service_setting(tmp_path, "METRICS_ALLOW", **env)


def test_the_environment_sets_the_defaults_and_refuses_a_bad_address(tmp_path):
    assert settings_of(tmp_path).stdout.splitlines()[-1] == "['127.0.0.1', '::1']"
    # With a token, any address may scrape (the token is the gate) unless a list is named.
    assert settings_of(tmp_path, CHECKPOINTS_METRICS_TOKEN=TOKEN).stdout.splitlines()[-1] == "None"
    named = settings_of(
        tmp_path, CHECKPOINTS_METRICS_TOKEN=TOKEN, CHECKPOINTS_METRICS_ALLOW="10.1.0.0/16"
    )
    assert named.stdout.splitlines()[-1] == "['10.1.0.0/16']"
    bad = settings_of(tmp_path, CHECKPOINTS_METRICS_ALLOW="10.0.0.1,prometheus.local")
    assert bad.returncode != 0
    assert "CHECKPOINTS_METRICS_ALLOW: 'prometheus.local' is not an address" in bad.stderr
