"""Inputs that once reached a 500: each now gets a 4xx naming what was wrong."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from checkpoints.api.limits import MAX_JSON_DEPTH, json_depth
from checkpoints.api.pagination import MAX_OFFSET

pytestmark = pytest.mark.django_db(transaction=True)


def deep_json(depth: int) -> str:
    return "[" * depth + "]" * depth


def error(response) -> dict:
    return response.json()["error"]


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 5000])
def test_deeply_nested_metadata_filter_is_400(clients, threads, depth):
    response = clients["alice"].get(
        "/api/threads/alice-1/history/", {"metadata.step": deep_json(depth)}
    )
    assert response.status_code == 400, response.content
    assert error(response)["field"] == "metadata.step"
    assert f"nests {depth} levels" in error(response)["message"]


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "[1, NaN]"])
def test_non_finite_metadata_filter_is_400(clients, threads, value):
    response = clients["alice"].get("/api/threads/alice-1/history/", {"metadata.step": value})
    assert response.status_code == 400, response.content
    assert error(response)["field"] == "metadata.step"
    assert "not a JSON number" in error(response)["message"]


def test_filter_values_that_are_not_json_still_match_as_text(clients, threads):
    response = clients["alice"].get("/api/threads/alice-1/history/", {"metadata.source": "loop"})
    assert response.status_code == 200
    results = response.json()["results"]
    assert results and {c["metadata"]["source"] for c in results} == {"loop"}
    nested_ok = deep_json(MAX_JSON_DEPTH)
    response = clients["alice"].get("/api/threads/alice-1/history/", {"metadata.x": nested_ok})
    assert response.status_code == 200 and response.json()["results"] == []


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 5000])
def test_deeply_nested_bulk_update_is_400_and_changes_nothing(clients, threads, depth):
    before = clients["alice"].get("/api/threads/alice-1/state/").json()
    body = '{"supersteps": [[{"channel": "topic", "value": ' + deep_json(depth) + "}]]}"
    response = clients["alice"].post(
        "/api/threads/alice-1/bulk-update/", body, content_type="application/json"
    )
    assert response.status_code == 400, response.content
    assert "request body nests" in error(response)["message"]
    assert clients["alice"].get("/api/threads/alice-1/state/").json() == before


def test_nan_in_a_body_is_400(clients, threads):
    body = '{"supersteps": [[{"channel": "topic", "value": NaN}]]}'
    response = clients["alice"].post(
        "/api/threads/alice-1/bulk-update/", body, content_type="application/json"
    )
    assert response.status_code == 400, response.content
    assert "NaN" in error(response)["message"]


@pytest.mark.parametrize("key", ["\x00abc", "abc\x01", "\x7f" * 40, "é" * 40])
def test_control_characters_in_a_token_are_401(threads, key):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    response = client.get("/api/threads/")
    assert response.status_code == 401, response.content
    assert error(response)["code"] == "authentication_failed"


@pytest.mark.parametrize("name", ["limit", "offset"])
@pytest.mark.parametrize("value", ["9" * 5000, str(MAX_OFFSET + 1), "²"])
def test_a_page_number_past_any_integer_is_400(clients, threads, name, value):
    response = clients["staff"].get("/api/threads/", {name: value})
    assert response.status_code == 400, response.content
    assert error(response)["field"] == name


def test_the_largest_offset_is_an_empty_page(clients, threads):
    response = clients["staff"].get("/api/threads/", {"offset": str(MAX_OFFSET)})
    assert response.status_code == 200, response.content
    assert response.json()["results"] == []


def test_json_depth_ignores_brackets_inside_strings():
    assert json_depth('{"a": "[[[[[[", "b": [{"c": "\\"]]]"}]}') == 3
