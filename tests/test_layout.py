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


# -- import circles -------------------------------------------------------------------------
PROJECT_PACKAGES = ("checkpoints", "retention", "project")


def _project_modules() -> dict[str, Path]:
    """Dotted name -> file of every module of the apps and the service (migrations aside:
    Django loads them by name, one after another, and they import nothing of each other)."""
    root = TESTS.parent
    found = {}
    for package in PROJECT_PACKAGES:
        for path in (root / package).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _import_edges(modules: dict[str, Path]) -> dict[str, dict[str, int]]:
    """Module -> {module it imports: line}, function-level imports included; ``from a
    import b`` counts as importing ``a.b`` where that is a module, else ``a``."""

    def home(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    edges: dict[str, dict[str, int]] = {}
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        edges[module] = {}
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    source = ".".join([*parts, *([node.module] if node.module else [])])
                else:
                    source = node.module or ""
                names = [f"{source}.{alias.name}" for alias in node.names]
                targets = [name if name in modules else source for name in names]
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                continue
            for target in targets:
                found = home(target) if target.startswith(PROJECT_PACKAGES) else None
                if found is not None and found != module:
                    edges[module].setdefault(found, node.lineno)
    return edges


def _circles(edges: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for other in edges[module]:
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in on_stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for module in sorted(edges):
        if module not in index:
            visit(module)
    return groups


def test_no_import_circles_function_level_imports_included():
    edges = _import_edges(_project_modules())
    circles = _circles(edges)
    said = [
        " <-> ".join(group)
        + "".join(
            f"\n    {a}:{edges[a][b]} imports {b}" for a in group for b in edges[a] if b in group
        )
        for group in circles
    ]
    assert not circles, "\n".join(said)


def test_the_circle_check_finds_a_circle():
    edges = {"a": {"b": 1}, "b": {"c": 2}, "c": {"a": 3}, "d": {"a": 4}}
    assert _circles(edges) == [["a", "b", "c"]]
    modules = _project_modules()
    assert "checkpoints.store.registry" in modules and "retention.sweep" in modules
    found = _import_edges(modules)
    # Function-level imports count: checkpoints/__init__.py imports its entry points lazily.
    assert "checkpoints.connect" in found["checkpoints"]
