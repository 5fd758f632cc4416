"""The package's layout: one home per module, entry points on the package itself; the tests'
shared pieces in helper modules, never in a test module or a conftest."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

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


def _imported(path: Path) -> list[tuple[int, str]]:
    """(line, dotted name) of every module and name ``path`` imports, relative ones resolved."""
    package = [TESTS.name, *path.relative_to(TESTS).parent.parts]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            found += [(node.lineno, module)]
            found += [(node.lineno, f"{module}.{alias.name}") for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
    return found


def test_no_module_of_the_tests_imports_a_test_module_or_a_conftest():
    """What tests share lives in helper modules (tests/store_helpers.py and the like);
    shared fixtures are plugins named in ``pytest_plugins``, not imported."""

    def is_test_module(name: str) -> bool:
        last = name.rsplit(".", 1)[-1]
        return name.startswith(f"{TESTS.name}.") and (
            last.startswith("test_") or last == "conftest"
        )

    offending = sorted(
        f"{path.relative_to(TESTS.parent)}:{line} imports {name}"
        for path in TESTS.rglob("*.py")
        for line, name in _imported(path)
        if is_test_module(name)
    )
    assert not offending, "\n".join(offending)
