"""The demo: seed_demo keeps a login that works, and demo.sh ends with what to do next."""

from __future__ import annotations

import io
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from django.contrib.auth import authenticate
from django.core.management import call_command

from tests.private_servers import free_port

ROOT = Path(__file__).resolve().parent.parent


def seed(*args: str) -> str:
    out = io.StringIO()
    call_command("seed_demo", *args, stdout=out, no_color=True)
    return out.getvalue()


@pytest.mark.django_db(transaction=True)
def test_second_demo_run_keeps_the_first_login():
    first = seed()
    password = re.search(r"login: admin  password: (\S+)", first).group(1)
    assert authenticate(username="admin", password=password)
    again = seed()
    assert "password: unchanged" in again and password not in again
    assert authenticate(username="admin", password=password), "the second run locked it out"
    chosen = seed("--password", "a-new-password")
    assert "password: a-new-password" in chosen
    assert authenticate(username="admin", password="a-new-password")
    assert not authenticate(username="admin", password=password)


def test_demo_script_prints_login_docs_token_and_stop_last(tmp_path):
    port = free_port()
    env = {
        **os.environ,
        "CHECKPOINTS_DATA_DIR": str(tmp_path),
        "DEMO_PORT": str(port),
        "DEMO_SKIP_INSTALL": "1",  # the suite's environment is installed already
        "VENV": sys.prefix,  # and it is this one (CI runs the suite in two)
    }
    env.pop("DJANGO_SETTINGS_MODULE", None)
    env.pop("REDIS_URL", None)  # the demo's own Redis database, as a newcomer gets it
    env.pop("DATABASE_URL", None)
    demo = subprocess.Popen(
        ["bash", "scripts/demo.sh"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    lines: list[str] = []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = demo.stdout.readline()
            if not line:
                break
            lines.append(line.rstrip("\n"))
            if len([x for x in lines if x.startswith("=====")]) == 2:
                break
        block = "\n".join(lines[lines.index(" Checkpoint Store demo is running") :])
        assert re.search(r"login: admin  password: \S+", block), block
        assert f"http://127.0.0.1:{port}/api/docs/" in block
        assert "manage.py drf_create_token admin" in block
        assert "Ctrl+C" in block
        # Every service it uses, named: the web port, the database file, Redis db 15.
        assert f"web server 127.0.0.1:{port}" in block
        assert f"database  SQLite file {tmp_path}/checkpoints.sqlite3" in block
        assert "Redis     redis://127.0.0.1:6379/15, the cache" in block
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/docs/", timeout=10) as page:
            assert page.status == 200
    finally:
        os.killpg(demo.pid, signal.SIGTERM)
        demo.wait(timeout=30)


@pytest.mark.parametrize("port", ["taken", "eighty", "0", "70000"])
def test_demo_refuses_a_taken_or_bad_port_before_printing_anything(tmp_path, port):
    import socket

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        if port == "taken":
            port = str(listener.getsockname()[1])
        env = {
            **os.environ,
            "CHECKPOINTS_DATA_DIR": str(tmp_path),
            "DEMO_PORT": port,
            "DEMO_SKIP_INSTALL": "1",
            "VENV": sys.prefix,
        }
        done = subprocess.run(
            ["bash", "scripts/demo.sh"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stdout == ""
    assert "DEMO_PORT" in done.stderr and port in done.stderr
    # Nothing was set up: no database was made in the data folder.
    assert list(tmp_path.iterdir()) == []
