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
