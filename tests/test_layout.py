"""The package's layout: one home per module, entry points on the package itself."""

from __future__ import annotations

import importlib

import pytest

# Modules that only re-exported others' names until the restructure (issue 29).
GONE = [
    "checkpoints.savers",
    "checkpoints.savers.base",
    "checkpoints.savers.orm",
    "checkpoints.savers.redis",
    "checkpoints.savers.memory",
    "checkpoints.diff",
    "checkpoints.encryption",
    "checkpoints.api.plain_json",
    "project.dburl",
]


@pytest.mark.parametrize("module", GONE)
def test_no_module_stands_in_for_another(module):
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(module)


def test_the_entry_points_are_the_packages_own():
    import checkpoints
    from checkpoints.connect import afrom_conn_string, from_conn_string
    from checkpoints.store.registry import get_saver

    assert checkpoints.from_conn_string is from_conn_string
    assert checkpoints.afrom_conn_string is afrom_conn_string
    assert checkpoints.get_saver is get_saver
    assert sorted(checkpoints.__all__) == ["afrom_conn_string", "from_conn_string", "get_saver"]


def test_langgraphs_reserved_channel_names_are_spelled_in_one_place():
    from pathlib import Path

    import checkpoints
    import retention

    names = ('"__interrupt__"', '"__resume__"', '"__error__"', '"__pregel_tasks"')
    spelled = sorted(
        str(path.relative_to(Path(checkpoints.__file__).parent.parent))
        for package in (checkpoints, retention)
        for path in Path(package.__file__).parent.rglob("*.py")
        if "migrations" not in path.parts and any(n in path.read_text() for n in names)
    )
    assert spelled == ["checkpoints/channels.py"]
