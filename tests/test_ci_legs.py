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
