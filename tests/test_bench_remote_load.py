"""`bench.remote_load` at a tiny size: a private PostgreSQL server, two store services, client
processes on each setup, the connections sampled, everything stopped after."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import psycopg
import pytest

from bench.remote_load import PrivatePostgres, split, summarize
from tests.services import need_service


def _servers_missing() -> str | None:
    has_binaries = any(Path("/usr/lib/postgresql").glob("*/bin/initdb")) or shutil.which("initdb")
    if not has_binaries:
        return "PostgreSQL's server binaries (initdb, pg_ctl) are not installed"
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "runuser is missing (initdb refuses to run as root)"
    return None


def test_runs_are_split_evenly_and_samples_summarized():
    assert split(128, 4) == [32, 32, 32, 32]
    assert split(10, 4) == [3, 3, 2, 2]
    assert summarize([3, 9, 5, 7]) == (9, 6.0)
    assert summarize([])[0] == 0


def test_the_private_server_takes_the_raised_connection_limit_and_is_removed():
    need_service(_servers_missing())
    server = PrivatePostgres(max_connections=150)
    try:
        server.start()
        assert 5433 <= server.port <= 5499
        with psycopg.connect(server.url("postgres")) as conn:
            assert conn.execute("SHOW max_connections").fetchone()[0] == "150"
    finally:
        server.stop()
    assert not server.folder.exists()
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(server.url("postgres"), connect_timeout=2)


def test_a_quick_load_run_measures_both_setups(capsys):
    need_service(_servers_missing())
    from bench.remote_load import main

    argv = ["--runs", "4", "--clients", "2", "--threads", "1", "--turns", "1", "--rounds", "1"]
    tallies = main([*argv, "--service-pool", "2"])
    assert set(tallies) == {"remote", "lg-apostgres"}
    for setup, tally in tallies.items():
        assert tally.turns == 4, setup
        assert len(tally.latencies) == 4, setup
        # Every turn makes the graph's saver calls: a get_tuple, a put per node and the input.
        assert tally.calls >= 4 * 12, setup
        assert tally.samples and max(tally.samples) >= 1, setup
    assert tallies["remote"].service_cpu > 0
    out = capsys.readouterr().out
    assert "remote / lg-apostgres turns/s:" in out
    assert "RESULT label=remote runs=4 clients=2" in out
    assert "RESULT label=lg-apostgres runs=4 clients=2" in out
