"""The fuzz tests' own yardstick: the stored-rows fingerprint and the guard that reads it."""

from __future__ import annotations

import os

import pytest
from django.http import HttpResponse
from django.test import RequestFactory

from checkpoints.models import FinishedMark
from checkpoints.store.planning import utcnow
from tests.fuzz_fixtures import CHANGED_HEADER, StoredRowsGuard, changed_tables, fingerprint

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "pg"])


def test_the_fingerprint_sees_an_insert_an_update_and_a_delete(pg_seed):
    start = fingerprint("pg")
    assert fingerprint("pg") == start
    mark = FinishedMark.objects.using("pg").get(thread_id="alice-1")
    mark.owner = "someone else"
    mark.save(using="pg")
    assert changed_tables(start, fingerprint("pg")) == ["checkpoints_finishedmark"]
    mark.delete()
    after_delete = fingerprint("pg")
    FinishedMark.objects.using("pg").create(thread_id="x", marked_at=utcnow(), due_at=utcnow())
    assert changed_tables(after_delete, fingerprint("pg")) == ["checkpoints_finishedmark"]


class PgGuard(StoredRowsGuard):
    using = "pg"


@pytest.mark.parametrize("status", [200, 400, 404])
def test_the_guard_marks_only_a_4xx_that_changed_rows(pg_seed, tmp_path, monkeypatch, status):
    violations = tmp_path / "changes.txt"
    monkeypatch.setenv("FUZZ_VIOLATIONS_FILE", str(violations))

    def view(request):
        FinishedMark.objects.using("pg").filter(thread_id="alice-1").delete()
        return HttpResponse(status=status)

    answer = PgGuard(view)(RequestFactory().post("/api/threads/alice-1/finish/"))
    if status >= 400:
        assert answer[CHANGED_HEADER] == "checkpoints_finishedmark"
        assert "POST /api/threads/alice-1/finish/ -> " in violations.read_text()
    else:
        assert CHANGED_HEADER not in answer and not os.path.exists(violations)

    unchanged = PgGuard(lambda request: HttpResponse(status=400))(RequestFactory().get("/"))
    assert CHANGED_HEADER not in unchanged
