"""Fuzz the LangGraph-compatible routes against their OpenAPI document (schemathesis CLI).

A live server on SQLite with a thread a real graph wrote (``seed-1``, the document's
example id) and the graph registered; answers are checked for no 5xx and for status codes
the document names.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fuzz_fixtures import ROOT, SCHEMATHESIS

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


def test_openapi_document_is_served_without_auth(lg):
    import httpx

    doc = httpx.get(f"{lg.url}/openapi.json").json()
    assert doc["openapi"].startswith("3.")
    assert "/threads/{thread_id}/storage" in doc["paths"]


@pytest.mark.parametrize("lg", ["sqlite"], indirect=True)
def test_routes_never_answer_5xx(lg, tmp_path):
    import subprocess

    lg.run_graph("seed-1")
    command = [
        str(SCHEMATHESIS),
        "--config-file",
        str(Path(__file__).with_name("schemathesis.toml")),
        "run",
        f"{lg.url}/openapi.json",
        "--url",
        lg.url,
        "--checks",
        "not_a_server_error,status_code_conformance,content_type_conformance",
        "--header",
        f"x-api-key: {lg.tokens['alice']}",
        "--workers",
        "1",
        "--no-color",
        "--max-examples",
        "20",
        "--seed",
        "31",
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=400, cwd=ROOT)
    output = done.stdout + done.stderr
    print(output[-600:])
    assert done.returncode == 0, output[-8000:]
    assert "Test cases:" in output and "failure" not in output.split("Test cases:")[1]
