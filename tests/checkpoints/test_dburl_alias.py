"""One rule turns a URL into a database alias (`checkpoints.connect.database_alias`): a
saver's ``conn_string`` and `from_conn_string` register a URL's database the same way,
whichever asks first."""

from __future__ import annotations

import pytest
from django.db import connections

from checkpoints.connect import alias_for_conn_string, database_alias


@pytest.mark.parametrize("first", ["saver", "from_conn_string"])
def test_either_entrance_registers_the_same_database(tmp_path, first):
    url = f"sqlite:///{tmp_path / first}.sqlite3"
    if first == "saver":
        alias = alias_for_conn_string(url)
        again, _ = database_alias(url)
    else:
        again, _ = database_alias(url)
        alias = alias_for_conn_string(url)
    assert alias == again and alias.startswith("checkpoints_")
    entry = connections.settings[alias]
    assert entry["NAME"] == str(tmp_path / f"{first}.sqlite3")
    assert entry["OPTIONS"]["transaction_mode"] == "IMMEDIATE"
    del connections.settings[alias]
