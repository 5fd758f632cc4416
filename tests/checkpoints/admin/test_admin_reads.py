"""The admin reads the store through its queries (`checkpoints.admin.queries`) and the shared
`checkpoints.selectors`, and chooses the store in one module (`checkpoints.admin.store_choice`):
no other admin module queries a store table itself."""

from __future__ import annotations

import re
from pathlib import Path

import checkpoints
import retention

STORE_MODELS = ("Thread", "Checkpoint", "ChannelBlob", "PendingWrite", "FinishedMark")
ADMIN_MODULES = [
    *sorted((Path(checkpoints.__file__).parent / "admin").glob("*.py")),
    *sorted((Path(retention.__file__).parent / "admin").glob("*.py")),
]
# The one admin module whose subject is the queries on the store's tables.
QUERIES = Path(checkpoints.__file__).parent / "admin" / "queries.py"


def test_no_admin_module_queries_a_store_table():
    direct = re.compile(rf"\b({'|'.join(STORE_MODELS)})\.objects\b")
    found = [
        f"{path.name}:{number}: {line.strip()}"
        for path in ADMIN_MODULES
        if path != QUERIES
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if direct.search(line)
    ]
    assert found == []
    assert direct.search(QUERIES.read_text())


def test_the_store_choice_has_a_module_of_its_own():
    # A page's request state: the store it reads, and what it may still show of values.
    holders = [path.name for path in ADMIN_MODULES if "ContextVar(" in path.read_text()]
    assert holders == ["store_choice.py", "value_cut.py"]
