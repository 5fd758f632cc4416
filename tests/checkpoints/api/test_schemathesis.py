"""Fuzz the live API against its own OpenAPI schema with schemathesis (every check).

Runs of the schemathesis CLI, each authenticated with the token of a staff user holding
``retention.run_sweep``, over seeded threads, bounded by ``--max-examples`` (and
``--max-time``); a fixed seed keeps them repeatable:

- stateless, on pytest-django's live server (the default SQLite store);
- stateless fuzzing, then the stateful phase (chains of calls along the schema's OpenAPI
  links), on a server whose Django database and checkpoint provider are PostgreSQL, with
  one more check: a 4xx answer changed no stored row (``tests.fuzz_fixtures``).
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from rest_framework.authtoken.models import Token

from tests.api_fixtures import run_demo
from tests.fuzz_fixtures import ROOT, SCHEMATHESIS

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

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


def run_schemathesis(url: str, token: str, tmp_path: Path, *extra: str, env=None) -> str:
    """Run the CLI; fail with its output unless every check passed. Returns the output."""
    config = tmp_path / "schemathesis.toml"
    config.write_text(CONFIG)
    command = [
        str(SCHEMATHESIS),
        "--config-file",
        str(config),
        "run",
        f"{url}/api/schema/",
        "--checks",
        "all",
        "--header",
        f"Authorization: Token {token}",
        "--workers",
        "1",
        "--no-color",
        *extra,
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=ROOT, env=env)
    output = done.stdout + done.stderr
    cases, final = CASES_LINE.search(output), FINAL_LINE.search(output)
    assert cases and final, output[-4000:]
    print(f"\nschemathesis: {cases.group(1)} | {final.group(0)}")
    assert done.returncode == 0, output[-8000:]
    assert "passed" in cases.group(1) and "fail" not in cases.group(1)
    return output


def test_api_conforms_to_its_schema(live_server, users, threads, tmp_path):
    run_demo("sweeper/own thread", users["sweeper"])
    token = Token.objects.create(user=users["sweeper"]).key
    run_schemathesis(
        live_server.url, token, tmp_path, "--max-examples", "20", "--max-time", "40", "--seed", "8"
    )


STATEFUL_LINES = re.compile(r"^\s*(Scenarios|API Links):.*$", re.MULTILINE)


def test_api_on_postgres_statelessly_then_statefully(pg_server, pg_seed, tmp_path):
    """Every phase on PostgreSQL: no 5xx, and no 4xx that changed a stored row."""
    env = {
        **os.environ,
        "SCHEMATHESIS_HOOKS": "tests.checkpoints.api.schemathesis_hooks",
        "PYTHONPATH": str(ROOT),
    }
    token = pg_seed.tokens["sweeper"]
    # Bounded by examples, not time (a time budget is always spent in full): the same
    # cases on a fast or a loaded machine. The coverage phase's boundary values run on
    # SQLite above; here the fuzzing phase, then chains of calls along the links.
    run_schemathesis(
        pg_server.url,
        token,
        tmp_path,
        "--seed",
        "19",
        "--max-examples",
        "10",
        "--phases",
        "fuzzing",
        env=env,
    )
    output = run_schemathesis(
        pg_server.url,
        token,
        tmp_path,
        "--seed",
        "19",
        "--max-examples",
        "40",
        "--phases",
        "stateful",
        env={**env, "FUZZ_STATEFUL_LISTS": "1"},
    )
    print("stateful: " + " | ".join(m.group(0).strip() for m in STATEFUL_LINES.finditer(output)))
    print("requests served, both runs:\n" + pg_server.summary("api/"))
    covered = re.search(r"API Links:\s+(\d+) covered", output)
    # The chains reach past the thread list (a guard for the links).
    assert covered and int(covered.group(1)) >= 10, output[-6000:]
    assert not pg_server.server_errors(), pg_server.server_errors()[:3]
    assert not pg_server.stored_changes()
