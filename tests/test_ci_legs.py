"""CI's Django 6 leg leaves out what tests/ci_legs.py lists, and only that."""

from pathlib import Path

import pytest

from tests.ci_legs import FIRST_LEG_ONLY, NOT_ORM_PROVIDERS

ROOT = Path(__file__).resolve().parent.parent


def test_every_module_the_first_leg_keeps_exists_and_says_why():
    for module, why in FIRST_LEG_ONLY.items():
        assert (ROOT / module).is_file(), f"{module} is listed in tests/ci_legs.py but gone"
        assert why.strip(), module


def test_the_orm_providers_run_in_both_legs():
    from tests.store_helpers import PROVIDERS

    names = {getattr(p, "values", (p,))[0] for p in PROVIDERS}
    assert {"sqlite", "postgres"} <= names - NOT_ORM_PROVIDERS


@pytest.mark.parametrize("provider", ["sqlite", "memory"])
def test_collected_items_carry_the_mark_as_the_list_says(provider, request):
    me = request.node
    marked = me.get_closest_marker("one_leg") is not None
    assert marked is (provider in NOT_ORM_PROVIDERS)
    for item in request.session.items:
        module = item.nodeid.split("::", 1)[0]
        if module in FIRST_LEG_ONLY:
            assert item.get_closest_marker("one_leg") is not None, item.nodeid


def test_cis_two_streams_split_the_readme_selection_and_drop_no_test(request):
    """.ci/run runs the README's test command without the `host`, `scale` and `browser`
    tests and those in its second stream: every test of the default selection is in exactly
    one."""
    import re

    from _pytest.mark.expression import Expression

    ci = (ROOT / ".ci" / "run").read_text()
    first = re.search(r"bash scripts/test\.sh [^\n]*\\\n\s*-m '([^']+)'", ci)
    second = re.search(r"\n\s*\.venv/bin/pytest -p no:cacheprovider -m '([^']+)'", ci)
    assert first and second, "the two streams' -m expressions are not where this test looks"
    streams = [Expression.compile(first[1]), Expression.compile(second[1])]
    # The README's selection: pyproject's addopts' -m, which a -m on the command line replaces.
    addopts = request.config.getini("addopts")
    default = Expression.compile(addopts[addopts.index("-m") + 1])
    for item in request.session.items:
        marks = {m.name for m in item.iter_markers()}
        if not default.evaluate(marks.__contains__):
            continue
        runs_in = [s.evaluate(marks.__contains__) for s in streams]
        assert runs_in.count(True) == 1, (item.nodeid, runs_in)
    # Each stream's tests flush their own Redis database.
    databases = re.findall(r"CHECKPOINTS_TEST_REDIS_URL=redis://127\.0\.0\.1:6379/(\d+)", ci)
    assert len(databases) == 3 and len(set(databases)) == 3, databases


def test_no_redis_database_of_ours_is_one_langgraphs_suite_claims():
    """LangGraph's suite runs beside the first stream and empties the Redis databases it
    claims; its `redis` and `remote-redis` processes claim two at once. A test of ours on
    one of those lost its Celery queue (stop 59's CI)."""
    import re

    from django.conf import settings

    from tests.langgraph_upstream.lgsuite_plugin import REDIS_DBS
    from tests.services import celery_test_broker

    claimed = set(REDIS_DBS[:2])
    ours = {
        int(celery_test_broker().rsplit("/", 1)[1]),
        int(settings.REDIS_TEST_URL.rsplit("/", 1)[1]),
    }
    ours |= set(range(2, 14))  # tests/settings.py's per-run choice
    plugin = ROOT / "tests" / "langgraph_upstream" / "lgsuite_plugin.py"
    for path in [*ROOT.glob("tests/**/*.py"), *ROOT.glob("scripts/*.sh"), ROOT / ".ci" / "run"]:
        if path != plugin:
            ours |= {int(n) for n in re.findall(r":6379/(\d+)", path.read_text())}
    assert not claimed & ours, sorted(claimed & ours)
