"""Fuzz the live API against its own OpenAPI schema with schemathesis (every check).

Runs the schemathesis CLI against pytest-django's live server, authenticated with the
token of a staff user holding ``retention.run_sweep``, over seeded threads. Bounded by
``--max-examples`` per operation and ``--max-time``; a fixed seed keeps runs repeatable.
"""

# Fixtures are imported from tests.api_fixtures; pytest injects them by name.
# ruff: noqa: F811

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from rest_framework.authtoken.models import Token

from tests.api_fixtures import run_demo, threads, users  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")
# Refusals by design that OpenAPI cannot state, so 400 counts as an answer there:
# "finished <= waiting" spans two fields; a channel value the store's serializer cannot hold
# (an integer beyond 64 bits) is refused with 400 codec_error.
CONFIG = """
[[operations]]
include-operation-id = "threads_retention"
checks.positive_data_acceptance.expected-statuses = ["2xx", "400", "401", "403", "404"]

[[operations]]
include-operation-id = "threads_bulk_update"
checks.positive_data_acceptance.expected-statuses = ["2xx", "400", "401", "403", "404", "409"]
# Too many supersteps of too many writes is also too many bytes: refused with 413 before
# the body is parsed, which is a rejection too.
checks.negative_data_rejection.expected-statuses = [
    "400", "401", "403", "404", "405", "406", "409", "413", "415", "422", "428", "429", "5xx"
]
"""
FINAL_LINE = re.compile(r"^=+ .+ in [\d.]+s =+$", re.MULTILINE)
CASES_LINE = re.compile(r"^Test cases:\n\s+(.+)$", re.MULTILINE)


def test_api_conforms_to_its_schema(live_server, users, threads, tmp_path):
    run_demo("sweeper/own thread", users["sweeper"])
    token = Token.objects.create(user=users["sweeper"]).key
    config = tmp_path / "schemathesis.toml"
    config.write_text(CONFIG)
    command = [
        str(SCHEMATHESIS),
        "--config-file",
        str(config),
        "run",
        f"{live_server.url}/api/schema/",
        "--checks",
        "all",
        "--header",
        f"Authorization: Token {token}",
        "--max-examples",
        "20",
        "--max-time",
        "40",
        "--seed",
        "8",
        "--workers",
        "1",
        "--no-color",
        "--report",
        "junit",
        "--report-dir",
        str(tmp_path),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=240)
    output = done.stdout + done.stderr
    cases, final = CASES_LINE.search(output), FINAL_LINE.search(output)
    assert cases and final, output[-4000:]
    print(f"\nschemathesis: {cases.group(1)} | {final.group(0)}")
    assert done.returncode == 0, output[-8000:]
    assert "passed" in cases.group(1) and "fail" not in cases.group(1)
