"""A private PostgreSQL primary with a synchronous standby (issue 17).

Started by the test (``initdb``, ``pg_basebackup -R``) in a temporary folder on spare
ports, stopped after; its configuration is the test's own to change. Stamps follow the
standby being added and removed, and a commit waiting on an absent standby fails within
``PG_STANDBY_WAIT_SECONDS`` with a specific error instead of hanging.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg
import pytest
from django.test import override_settings
from langgraph.checkpoint.base import empty_checkpoint

from checkpoints.store.postgres.saver import StandbyWaitTimeout
from tests.private_servers import free_ports
from tests.services import need_service

BINDIR = next(iter(sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)), "")
PORTS = range(6500, 6600)


def _as_postgres(*command: str) -> None:
    prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    done = subprocess.run([*prefix, *command], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{command}: {done.stdout}{done.stderr}"


class Cluster:
    """One primary and, on demand, one streaming standby, in ``folder``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port, self.standby_port = free_ports(PORTS, 2)
        self.running: list[Path] = []

    def start(self, data: Path, port: int) -> None:
        options = f"-p {port} -k {self.folder} -c listen_addresses=127.0.0.1"
        _as_postgres(
            f"{BINDIR}/pg_ctl", "-D", str(data), "-o", options, "-l", f"{data}.log", "-w", "start"
        )
        self.running.append(data)

    def stop(self, data: Path) -> None:
        _as_postgres(f"{BINDIR}/pg_ctl", "-D", str(data), "-m", "immediate", "-w", "stop")
        self.running.remove(data)

    def sql(self, statement: str) -> None:
        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute(statement)

    def configure(self, standby_names: str) -> None:
        self.sql(f"ALTER SYSTEM SET synchronous_standby_names = '{standby_names}'")
        self.sql("SELECT pg_reload_conf()")
        time.sleep(0.5)  # every backend reads the new file at its next command

    def url(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"


@pytest.fixture
def cluster():
    if not os.path.exists(f"{BINDIR}/initdb") or not shutil.which("runuser"):
        need_service("PostgreSQL's server binaries (initdb, pg_ctl, pg_basebackup) are missing")
    folder = Path(tempfile.mkdtemp(prefix="pg-standby-"))
    shutil.chown(folder, "postgres") if os.geteuid() == 0 else None
    found = Cluster(folder)
    primary = folder / "primary"
    _as_postgres(f"{BINDIR}/initdb", "-D", str(primary), "-A", "trust", "-U", "postgres")
    found.start(primary, found.port)
    try:
        found.sql("CREATE DATABASE checkpoint_store")
        yield found
    finally:
        for data in list(found.running):
            found.stop(data)
        shutil.rmtree(folder, ignore_errors=True)


def _put(saver, thread_id: str) -> str:
    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    saved = saver.put(config, empty_checkpoint(), {}, {})
    return saver.get_durability(saved)["level"]


def test_stamps_follow_the_standby_and_an_absent_one_fails_within_the_bound(
    cluster, django_db_blocker
):
    from checkpoints import from_conn_string

    standby = cluster.folder / "standby"
    settings_ = {"PG_STANDBY_WAIT_SECONDS": 2}
    with (
        django_db_blocker.unblock(),
        from_conn_string(cluster.url("checkpoint_store")) as saver,
        override_settings(CHECKPOINTS={**_checkpoints(), **settings_}),
    ):
        assert _put(saver, "alone") == "disk"

        # A synchronous standby joins: writes wait for it and say so.
        _as_postgres(
            f"{BINDIR}/pg_basebackup", "-D", str(standby), "-R", "-X", "stream", "-c", "fast",
            "-h", "127.0.0.1", "-p", str(cluster.port), "-U", "postgres",
        )  # fmt: skip
        cluster.start(standby, cluster.standby_port)
        cluster.configure("*")
        assert _put(saver, "replicated") == "replicated"

        # The standby dies: a write no longer waits forever but fails, naming the wait.
        cluster.stop(standby)
        started = time.monotonic()
        with pytest.raises(StandbyWaitTimeout, match="synchronous standby") as caught:
            _put(saver, "unconfirmed")
        assert time.monotonic() - started < 15
        assert "not acknowledged" in str(caught.value) or "wrote nothing" in str(caught.value)

        # The standby is taken out of the configuration: stamps follow at once.
        cluster.configure("")
        assert _put(saver, "alone-again") == "disk"
        # A named but absent standby: bounded and specific as well.
        cluster.configure("no_such_standby")
        with pytest.raises(StandbyWaitTimeout, match="waited more than 2 s"):
            _put(saver, "never-confirmed")
        cluster.configure("")
        assert _put(saver, "last") == "disk"
        levels = {
            t: saver.get_durability({"configurable": {"thread_id": t}})["level"]
            for t in ("alone", "replicated", "alone-again", "last")
        }
        assert levels == {
            "alone": "disk",
            "replicated": "replicated",
            "alone-again": "disk",
            "last": "disk",
        }


def _checkpoints() -> dict:
    from django.conf import settings

    return dict(settings.CHECKPOINTS)
