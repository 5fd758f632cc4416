"""The peer-suite harness's verdicts (run.py), without its sdists or servers: how the
allow-list is read and checked, which failures it explains, and when the run fails; and
which peer helper the plugin translates to ours."""

from __future__ import annotations

import pytest

from tests.langgraph_upstream import run
from tests.langgraph_upstream.run import AllowListError, Result

ALLOWLIST = """
[[not_applicable_modules]]
suite = "postgres"
module = "tests/test_store.py"
reason = "the peer's BaseStore"

[[not_applicable]]
suite = "postgres"
test = "tests/test_sync.py::test_private*"
reason = "patches the peer's private method"

[[allow]]
suite = "postgres"
test = "tests/test_prune.py::test_refuses[*-counters]"
why = "ours prunes instead of refusing"
ours = "tests/checkpoints/store/test_store_contract.py::test_prune_keeps"

[[allow]]
suite = "postgres"
test = "tests/test_prune.py::test_gone"
why = "a difference that no longer shows"
ours = "tests/x.py::test_y"

[[allow]]
suite = "sqlite"
test = "tests/test_sqlite.py::test_other_suite"
why = "another suite's entry"
ours = "tests/x.py::test_z"
"""


@pytest.fixture
def entries(tmp_path):
    path = tmp_path / "peer_allowlist.toml"
    path.write_text(ALLOWLIST)
    return run.allowlist("postgres", path)


def results(peer: dict[str, str], ours: dict[str, str], suite: str = "postgres"):
    return {
        f"{suite}.baseline": Result("baseline", peer),
        f"{suite}.{suite}": Result(suite, ours),
    }


def test_allowlist_keeps_the_suites_own_entries(entries):
    assert [e["test"] for e in entries["allow"]] == [
        "tests/test_prune.py::test_refuses[*-counters]",
        "tests/test_prune.py::test_gone",
    ]
    assert [e["module"] for e in entries["not_applicable_modules"]] == ["tests/test_store.py"]


def test_the_repositorys_allowlist_is_well_formed():
    for suite in run.PEER_SUITES:
        run.allowlist(suite)


@pytest.mark.parametrize(
    ("entry", "complaint"),
    [
        ('[[allow]]\nsuite = "postgres"\ntest = "t"\nwhy = "w"\n', "says no ours"),
        ('[[allow]]\nsuite = "postgres"\ntest = "t"\nwhy = " "\nours = "o"\n', "says no why"),
        ('[[not_applicable]]\nsuite = "postgres"\ntest = "t"\n', "says no reason"),
        ('[[not_applicable]]\nsuite = "langgraph"\ntest = "t"\nreason = "r"\n', "suite must"),
        ('[[not_applicable]]\nsuite = "pg"\ntest = "t"\nreason = "r"\n', "suite must"),
        ('[[allow]]\nsuite = "sqlite"\ntest = "t"\nwhy = "w"\nours = "o"\nwhy_not = "x"\n', "key"),
        ('[[not_applicable_modules]]\nsuite = "sqlite"\nmodule = "m"\n', "says no reason"),
        ('[[alow]]\nsuite = "sqlite"\ntest = "t"\n', "unknown kind"),
    ],
)
def test_an_entry_that_does_not_say_what_its_kind_must_is_refused(entry, complaint):
    with pytest.raises(AllowListError, match=complaint):
        run.load_allowlist(entry)


@pytest.mark.parametrize(
    ("test_id", "pattern", "matches"),
    [
        ("tests/a.py::test_x", "tests/a.py::test_x", True),
        ("tests/a.py::test_x[base]", "tests/a.py::test_x", False),
        ("tests/a.py::test_x[base]", "tests/a.py::test_x*", True),
        ("tests/a.py::test_xy", "tests/a.py::test_x*", True),
        ("tests/a.py::test_x[aio_pool-counters]", "tests/a.py::test_x[*-counters]", True),
        ("tests/a.py::test_x[aio_pool-snapshot]", "tests/a.py::test_x[*-counters]", False),
        ("tests/test_sync.py::test_y[pool]", "tests/test_*.py::test_y*", True),
        ("tests/a.py::test_x[base]", "tests/a.py::test_x[base", False),
    ],
)
def test_an_entry_names_a_test_and_each_star_stands_for_any_text(test_id, pattern, matches):
    assert run._matches(test_id, pattern) is matches


def test_a_failure_only_on_ours_is_explained_by_the_allowlist_or_not(entries):
    peer = {
        "tests/test_sync.py::test_private[base]": "passed",
        "tests/test_prune.py::test_refuses[base-counters]": "passed",
        "tests/test_prune.py::test_refuses[base-snapshot]": "passed",
        "tests/test_prune.py::test_both_fail": "failed",
        "tests/test_prune.py::test_fine": "passed",
    }
    ours = {
        "tests/test_sync.py::test_private[base]": "failed",
        "tests/test_prune.py::test_refuses[base-counters]": "failed",
        "tests/test_prune.py::test_refuses[base-snapshot]": "failed",
        "tests/test_prune.py::test_both_fail": "failed",
        "tests/test_prune.py::test_fine": "passed",
        "tests/test_prune.py::test_only_ours_ran": "failed",
    }
    found = results(peer, ours)
    verdict = run.judged(found, "postgres.postgres", entries)
    assert verdict["not_applicable"] == [
        ("tests/test_sync.py::test_private[base]", "patches the peer's private method")
    ]
    assert verdict["allowed"] == [
        ("tests/test_prune.py::test_refuses[base-counters]", "ours prunes instead of refusing")
    ]
    # Failing on the peer too, or not run on the peer, is no difference of ours.
    assert verdict["unexplained"] == ["tests/test_prune.py::test_refuses[base-snapshot]"]
    assert verdict["stale"] == ["tests/test_prune.py::test_gone"]
    assert run.exit_code(found, {"postgres.postgres": verdict}) == 1


def test_the_run_passes_when_every_failure_only_on_ours_is_listed(entries):
    found = results(
        {"tests/test_sync.py::test_private[pool]": "passed", "tests/test_a.py::t": "passed"},
        {"tests/test_sync.py::test_private[pool]": "failed", "tests/test_a.py::t": "passed"},
    )
    verdict = run.judged(found, "postgres.postgres", entries)
    assert verdict["unexplained"] == []
    assert run.exit_code(found, {"postgres.postgres": verdict}) == 0


def test_a_process_that_reported_nothing_fails_the_run(entries):
    found = results({"tests/test_a.py::t": "passed"}, {})
    verdict = run.judged(found, "postgres.postgres", entries)
    assert verdict["unexplained"] == []
    assert run.exit_code(found, {"postgres.postgres": verdict}) == 1


def test_langgraphs_own_suite_allows_no_difference():
    found = {
        "baseline": Result("baseline", {"tests/test_pregel.py::t[memory]": "passed"}),
        "redis": Result("redis", {"tests/test_pregel.py::t[memory]": "failed"}),
    }
    assert run.exit_code(found, {}) == 1
    found["redis"].outcomes["tests/test_pregel.py::t[memory]"] = "passed"
    assert run.exit_code(found, {}) == 0


def test_not_applicable_modules_are_not_run(tmp_path, monkeypatch):
    allow = tmp_path / "peer_allowlist.toml"
    allow.write_text(ALLOWLIST)
    monkeypatch.setattr(run, "ALLOWLIST", allow)
    root = tmp_path / "sdist"
    (root / "tests").mkdir(parents=True)
    for name in ("test_store.py", "test_sync.py", "conftest.py"):
        (root / "tests" / name).write_text("")
    assert run.modules(root, "postgres") == ["tests/test_sync.py"]


def test_junit_ids_are_pytests_and_any_failure_of_a_test_wins(tmp_path):
    junit = tmp_path / "r.xml"
    junit.write_text(
        """<testsuites><testsuite>
        <testcase classname="tests.test_sqlite.TestSqliteSaver" name="test_a"/>
        <testcase classname="tests.test_prune" name="test_b[base]"><failure message="x"/></testcase>
        <testcase classname="tests.test_prune" name="test_c"/>
        <testcase classname="tests.test_prune" name="test_c"><error message="teardown"/></testcase>
        <testcase classname="tests.test_prune" name="test_d"><skipped/></testcase>
        </testsuite></testsuites>"""
    )
    assert run.parse_junit(junit) == {
        "tests/test_sqlite.py::TestSqliteSaver::test_a": "passed",
        "tests/test_prune.py::test_b[base]": "failed",
        "tests/test_prune.py::test_c": "failed",
        "tests/test_prune.py::test_d": "skipped",
    }


async def _rows(saver, thread_id):
    return {}


async def _rows_of_a_namespace(saver, thread_id, ns):
    return {}


@pytest.mark.parametrize(
    ("suite", "provider", "reader", "translated"),
    [
        ("postgres", "postgres", _rows, True),
        ("postgres", "remote-postgres", _rows, True),
        ("postgres", "baseline", _rows, False),
        ("sqlite", "sqlite", _rows, False),
        ("postgres", "postgres", _rows_of_a_namespace, False),
    ],
)
def test_only_the_postgres_suites_table_reader_is_pointed_at_ours(
    monkeypatch, suite, provider, reader, translated
):
    import types

    from tests.langgraph_upstream import lgsuite_plugin

    monkeypatch.setattr(lgsuite_plugin, "SUITE", suite)
    monkeypatch.setattr(lgsuite_plugin, "PROVIDER", provider)
    # The store behind the saver (the remote saver's service's for remote-*).
    monkeypatch.setattr(lgsuite_plugin, "STORE", provider.removeprefix("remote-"))
    module = types.ModuleType("tests.test_prune")
    module._rows = reader
    lgsuite_plugin._substitute(module)
    assert (module._rows is lgsuite_plugin._our_rows) is translated
    assert (module._rows is reader) is not translated


@pytest.mark.django_db
def test_a_shallow_stand_in_on_the_remote_saver_makes_the_service_keep_one_checkpoint():
    """A worker's RemoteSaver takes no max_checkpoints: the peer's Shallow* savers are the
    service's MAX_CHECKPOINTS, and the next saver of another kind puts it back."""
    from checkpoints.store_service.views import service_saver
    from tests.langgraph_upstream import lgsuite_plugin

    before = service_saver().max_checkpoints
    assert before != 1
    shallow = lgsuite_plugin._service_keeps(1)
    try:
        assert service_saver().max_checkpoints == 1
        assert lgsuite_plugin._service_keeps(1) is None  # already so: nothing stacked
        back = lgsuite_plugin._service_keeps(before)
        try:
            assert service_saver().max_checkpoints == before
        finally:
            back.disable()
    finally:
        shallow.disable()
    assert service_saver().max_checkpoints == before
