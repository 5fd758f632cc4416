"""Round-4 review: crafted import records beyond the round-3 list refuse their thread, named,
and never abort the import with a raw error."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command
from langgraph.checkpoint.base import empty_checkpoint

from tests.checkpoints.transfer.records_helpers import thread_records, write_export


def _write(**change):
    def spoil(thread, checkpoint):
        checkpoint["writes"][0].update(change)

    return spoil


MORE_BAD = {
    "ns-nul": lambda t, c: c.update(ns="a\x00"),
    "ns-surrogate": lambda t, c: c.update(ns="a\ud800"),
    "metadata-key-nul": lambda t, c: c["metadata"].update({"k\x00": 1}),
    "metadata-step-huge": lambda t, c: c["metadata"].update(step=2**31),
    "metadata-nested-surrogate": lambda t, c: c["metadata"].update(deep={"k\ud800": [1]}),
    "version-key-nul": lambda t, c: c.update(channel_versions={"a\x00": "1"}),
    "value-channel-nul": lambda t, c: c.update(values={"a\x00": c["values"]["a"]}),
    "value-pickle": lambda t, c: c["values"].update(a={"type": "pickle", "data": "gARLAS4="}),
    "idx-negative-huge": _write(idx=-(2**40)),
    "idx-bool": _write(idx=True),
    "thread-id-long": lambda t, c: None,
    "finished-overflow": lambda t, c: t.update(
        finished={"due_at": "0001-01-01T00:00:00+14:00", "owner": ""}
    ),
    "finished-past-9999": lambda t, c: t.update(
        finished={"due_at": "9999-12-31T23:59:59-14:00", "owner": ""}
    ),
    "finished-owner-number": lambda t, c: t.update(
        finished={"due_at": "2030-01-01T00:00:00+00:00", "owner": 5}
    ),
    "retention-bool": lambda t, c: t.update(retention={"waiting_minutes": True}),
    "retention-float": lambda t, c: t.update(retention={"waiting_minutes": 1.5}),
    "retention-list": lambda t, c: t.update(retention=[1]),
    "checkpoint-id-long": lambda t, c: c.update(id="1" * 100_000),
}


def test_more_crafted_records_refuse_only_their_thread(target, tmp_path, capsys):
    threads = [thread_records("good-1")]
    for name, spoil in MORE_BAD.items():
        records = thread_records(name, spoil)
        if name == "thread-id-long":
            long = "t" * 100_000
            records[0]["thread_id"] = records[-1]["thread_id"] = long
        threads.append(records)
    threads.append(thread_records("good-2"))
    path = tmp_path / "more.jsonl"
    write_export(path, threads)
    try:
        call_command("import_checkpoints", str(path))
    except CommandError:
        pass  # refusals make the command exit non-zero
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err, captured.err[-3000:]
    assert "Imported" in captured.out, (captured.out, captured.err[-3000:])
    refusals = [line for line in captured.err.splitlines() if line.startswith("refused: ")]
    # A NUL in a metadata key is dropped as on every write; a long checkpoint id is kept.
    for name in set(MORE_BAD) - {"metadata-key-nul", "checkpoint-id-long", "thread-id-long"}:
        assert any(f"thread {name!r}" in r for r in refusals), (name, refusals)
    assert any("t" * 50 in r for r in refusals), refusals
    for thread_id in ("good-1", "good-2"):
        assert target.get_tuple({"configurable": {"thread_id": thread_id}}) is not None
    # Whatever was taken reads back.
    for name in MORE_BAD:
        if name == "thread-id-long":
            continue
        found = target.get_tuple({"configurable": {"thread_id": name}})
        if found is not None:
            list(target.list({"configurable": {"thread_id": name}}))


# -- a LangGraph database source whose JSON nests deeper than Python's parser recurses ------
DEEP = "[" * 5000 + "]" * 5000


def _deep_and_fine(peer) -> None:
    for thread_id in ("deep", "fine"):
        peer.put(
            {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}},
            empty_checkpoint(),
            {"source": "input", "step": -1},
            {},
        )


def _refuses_deep_imports_fine(peer_url, target, capsys) -> None:
    with pytest.raises(CommandError, match="1 thread"):
        call_command("import_checkpoints", peer_url)
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err, captured.err[-2000:]
    assert "thread 'deep'" in captured.err and "nests deeper" in captured.err, captured.err
    assert target.get_tuple({"configurable": {"thread_id": "deep"}}) is None
    assert target.get_tuple({"configurable": {"thread_id": "fine"}}) is not None


def test_deep_metadata_in_a_database_source_refuses_its_thread(peer, peer_url, target, capsys):
    _deep_and_fine(peer)
    if type(peer).__name__ == "SqliteSaver":
        peer.conn.execute(
            "UPDATE checkpoints SET metadata = ? WHERE thread_id = 'deep'", ('{"x": ' + DEEP + "}",)
        )
        peer.conn.commit()
    else:
        peer.conn.execute(
            "UPDATE checkpoints SET metadata = jsonb_set(metadata, '{x}', %s::jsonb) "
            "WHERE thread_id = 'deep'",
            (DEEP,),
        )
    _refuses_deep_imports_fine(peer_url, target, capsys)


def test_a_deep_jsonb_body_in_a_postgres_source_refuses_its_thread(
    lg_postgres, lg_postgres_url, target, capsys
):
    # SqliteSaver keeps the body as a typed blob; PostgresSaver's is JSONB the driver parses.
    _deep_and_fine(lg_postgres)
    lg_postgres.conn.execute(
        "UPDATE checkpoints SET checkpoint = jsonb_set(checkpoint, '{channel_values,x}', "
        "%s::jsonb) WHERE thread_id = 'deep'",
        (DEEP,),
    )
    _refuses_deep_imports_fine(f"langgraph+{lg_postgres_url}", target, capsys)
