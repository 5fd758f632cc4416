"""A private PgBouncer in transaction-pooling mode, in front of the test PostgreSQL server.

Started once per test session on a free port in 6400-6499, in a temporary folder, and
stopped after. Debian's package provides /usr/sbin/pgbouncer (scripts/test.sh installs it).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connections

from tests.private_servers import free_ports
from tests.services import need_service

PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
PORTS = range(6400, 6500)


def _answers(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.5)
        return probe.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(scope="session")
def pgbouncer_port():
    """The port of a private PgBouncer (transaction pooling) in front of the test server."""
    need_service(settings.POSTGRES_UNAVAILABLE)
    if not os.path.exists(PGBOUNCER):
        need_service(f"PgBouncer is not installed ({PGBOUNCER}); scripts/test.sh installs it")
    server = settings.DATABASES["pg"]
    folder = Path(tempfile.mkdtemp(prefix="pgbouncer-"))
    # PgBouncer refuses to run as root; as root it drops to `nobody`, who must write here.
    folder.chmod(0o777)
    [port] = free_ports(PORTS)
    (folder / "users.txt").write_text(f'"{server["USER"] or "postgres"}" ""\n')
    (folder / "pgbouncer.ini").write_text(
        "[databases]\n"
        f"* = host={server['HOST'] or '127.0.0.1'} port={server['PORT'] or 5432}\n"
        "[pgbouncer]\n"
        "listen_addr = 127.0.0.1\n"
        f"listen_port = {port}\n"
        "unix_socket_dir =\n"
        "auth_type = trust\n"
        f"auth_file = {folder / 'users.txt'}\n"
        "pool_mode = transaction\n"
        f"logfile = {folder / 'pgbouncer.log'}\n"
        "max_client_conn = 400\n"
        "default_pool_size = 10\n"
        "ignore_startup_parameters = extra_float_digits,options\n"
    )
    for name in ("users.txt", "pgbouncer.ini"):
        (folder / name).chmod(0o644)
    command = [PGBOUNCER, str(folder / "pgbouncer.ini")]
    if os.geteuid() == 0:
        command[1:1] = ["-u", "nobody"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 15
        while not _answers(port):
            if process.poll() is not None or time.monotonic() > deadline:
                log = (
                    (folder / "pgbouncer.log").read_text()
                    if (folder / "pgbouncer.log").exists()
                    else ""
                )
                pytest.fail(f"PgBouncer did not start on port {port}: {log[-2000:]}")
            time.sleep(0.1)
        # The "pgb" alias (tests/settings.py) is the test database through this PgBouncer.
        connections.settings["pgb"]["PORT"] = str(port)
        yield port
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        shutil.rmtree(folder, ignore_errors=True)


def bounced_url(port: int) -> str:
    """The URL of the test database, through the PgBouncer on ``port``."""
    server = settings.DATABASES["pg"]
    return f"postgresql://{server['USER'] or 'postgres'}@127.0.0.1:{port}/{server['NAME']}"
