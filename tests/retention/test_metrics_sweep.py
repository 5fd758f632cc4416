"""The sweep's counters are served on /metrics."""

from __future__ import annotations

import re
from datetime import timedelta

from checkpoints.store.planning import utcnow
from retention.runs import mark_finished
from retention.sweep import register_live_thread_filter, sweep_checkpoints
from tests.retention_fixtures import write
from tests.store_helpers import backing_saver

SPARED = re.compile(
    r'^checkpoint_sweep_spared_total\{horizon="finished",owner="scrape-probe"\} (\S+)$', re.M
)


def scraped(client, pattern) -> float:
    response = client.get("/metrics")
    assert response.status_code == 200
    found = pattern.search(response.content.decode())
    return float(found.group(1)) if found else 0.0


def test_metrics_serves_the_spared_counter_and_sweep_totals(store, client):
    now = utcnow()
    for name in ("a", "b"):
        write(store, name)
        mark_finished(backing_saver(store), name, now=now - timedelta(days=2))
    register_live_thread_filter("scrape-probe", lambda ids: {"a"})
    before = scraped(client, SPARED)

    sweep_checkpoints(saver=backing_saver(store), now=now)

    assert scraped(client, SPARED) == before + 1
    body = client.get("/metrics").content.decode()
    assert 'checkpoint_sweep_deleted_total{horizon="finished"}' in body
    assert 'checkpoint_sweep_runs_total{dry_run="false",outcome="ok"}' in body
    assert f'checkpoint_sweep_duration_seconds_count{{provider="{store.provider}"}}' in body
