"""Every thread of an import is checked before anything of it is written, and files are read
within bounds.

A bad record (a retention past the API's bounds, a finished mark that is a string, a NUL or
lone surrogate in an id, a body of the wrong shape) refuses its thread, named with its
file line (or its thread and checkpoint for a database source); the other threads are
imported and the command exits non-zero. ``--strict`` imports nothing then. A file whose
line or whole is larger than the bounds is refused at that line without reading on.
"""

from __future__ import annotations

import base64
import json
import tracemalloc
from pathlib import Path

import pytest
import zstandard
from django.core.management import CommandError, call_command
from langgraph.checkpoint.base import empty_checkpoint

from checkpoints.transfer.records import header
from tests.checkpoints.transfer.records_helpers import thread_records, write_export
from tests.store_helpers import IN_PROCESS


def _write(**change):
    def spoil(thread, checkpoint):
        checkpoint["writes"][0].update(change)

    return spoil


# Each spoiled thread, and what its refusal says is wrong.
BAD = {
    "finished-as-text": (lambda t, c: t.update(finished="soon"), "its finished mark is 'soon'"),
    "finished-no-zone": (
        lambda t, c: t.update(finished={"due_at": "2030-01-01T00:00:00", "owner": ""}),
        "is not an ISO time with a zone",
    ),
    "retention-too-long": (
        lambda t, c: t.update(retention={"waiting_minutes": 99999}),
        "longer than the platform's 10080 minutes",
    ),
    "retention-as-text": (
        lambda t, c: t.update(retention={"waiting_minutes": "60"}),
        "waiting_minutes must be a whole number",
    ),
    "retention-unknown-key": (
        lambda t, c: t.update(retention={"hours": 1}),
        "its retention names 'hours'",
    ),
    "retention-finished-past-waiting": (
        lambda t, c: t.update(retention={"waiting_minutes": 5, "finished_minutes": 9}),
        "longer than the declared waiting retention",
    ),
    "owner-a-number": (lambda t, c: t.update(owner=7), "its owner is a int"),
    "checkpoint-id-nul": (lambda t, c: c.update(id="1f0\x00"), "must not contain NUL"),
    "checkpoint-id-surrogate": (lambda t, c: c.update(id="1f0\ud800"), "lone surrogate"),
    "parent-nul": (lambda t, c: c.update(parent="p\x00"), "must not contain NUL"),
    "task-id-nul": (_write(task_id="t\x00"), "must not contain NUL"),
    "task-path-nul": (_write(task_path="\x00"), "must not contain NUL"),
    "idx-past-32-bits": (_write(idx=2**40), "is not a 32-bit whole number"),
    "channel-nul": (_write(channel="a\x00"), "must not contain NUL"),
    "metadata-surrogate": (
        lambda t, c: c["metadata"].update(note="\ud800"),
        "its metadata['note'] holds a lone surrogate",
    ),
    "metadata-step-text": (lambda t, c: c["metadata"].update(step="x"), "step is 'x'"),
    "version-an-object": (
        lambda t, c: c.update(channel_versions={"a": {"x": 1}}),
        "the version of channel 'a' is {'x': 1}",
    ),
    "versions-seen-text": (lambda t, c: c.update(versions_seen="x"), "versions_seen is 'x'"),
    "format-version-text": (lambda t, c: c.update(v="4"), "its format version 'v' is '4'"),
    "ts-not-a-time": (lambda t, c: c.update(ts=5), "its 'ts' 5 is not an ISO time"),
    "updated-channels-text": (lambda t, c: c.update(updated_channels="a"), "updated_channels"),
}
THREAD_ID_BAD = {
    "t\x00nul": "its thread id must not contain NUL",
    "t\ud800": "holds a lone surrogate",
}


THREAD_LEVEL = {
    *THREAD_ID_BAD,
    *(n for n in BAD if n.startswith(("finished", "retention", "owner"))),
}


def bad_file(path: Path) -> tuple[dict[str, int], dict[str, str]]:
    """good-1, every spoiled thread, good-2: (line of each checkpoint, expected reason)."""
    threads = [thread_records("good-1")]
    threads += [thread_records(name, spoil) for name, (spoil, _) in BAD.items()]
    threads += [thread_records(t) for t in THREAD_ID_BAD]
    threads += [thread_records("good-2")]
    reasons = {name: why for name, (_, why) in BAD.items()} | THREAD_ID_BAD
    return write_export(path, threads), reasons


def test_a_bad_record_refuses_its_thread_named_and_the_rest_are_imported(target, tmp_path, capsys):
    path = tmp_path / "bad.jsonl"
    at, reasons = bad_file(path)
    with pytest.raises(CommandError, match=f"{len(reasons)} thread\\(s\\) refused"):
        call_command("import_checkpoints", str(path))
    captured = capsys.readouterr()
    refusals = [line for line in captured.err.splitlines() if line.startswith("refused: ")]
    assert len(refusals) == len(reasons)
    for name, why in reasons.items():
        named = [r for r in refusals if f"thread {name!r}" in r]
        assert len(named) == 1, (name, refusals)
        # Named with its file and line: the thread record's for the thread's own fields.
        line = at[name] - 1 if name in THREAD_LEVEL else at[name]
        assert named[0].startswith(f"refused: {path}:{line}: "), (named[0], line)
        assert why in named[0], (name, named[0])
    assert "Imported 2 thread(s)" in captured.out
    for thread_id in ("good-1", "good-2"):
        assert target.get_tuple({"configurable": {"thread_id": thread_id}}) is not None
    for name in BAD:
        assert target.get_tuple({"configurable": {"thread_id": name}}) is None


def test_strict_refuses_the_whole_import(target, tmp_path, capsys):
    path = tmp_path / "bad.jsonl"
    _, reasons = bad_file(path)
    with pytest.raises(CommandError, match="--strict: nothing was imported"):
        call_command("import_checkpoints", str(path), "--strict")
    err = capsys.readouterr().err.splitlines()
    assert len([line for line in err if line.startswith("refused: ")]) == len(reasons)
    for thread_id in ("good-1", "good-2"):
        assert target.get_tuple({"configurable": {"thread_id": thread_id}}) is None


def _unstorable(thread, checkpoint):
    # Read fine, refused by the store as it writes: a lone surrogate inside a value.
    checkpoint["values"]["a"] = {
        "type": "json",
        "data": base64.b64encode(b'{"text": "\\ud800"}').decode(),
    }


# The import command writes into the deployment's own saver (get_saver()), never a remote
# one; a thread's exact retention, which an import restores, has no call on the remote saver
# (a worker declares a shorter one).
@pytest.mark.parametrize("provider", IN_PROCESS)
def test_strict_takes_back_what_it_wrote_when_the_store_refuses_a_thread(target, tmp_path, capsys):
    path = tmp_path / "late.jsonl"
    threads = [thread_records("s-1"), thread_records("s-2"), thread_records("s-3", _unstorable)]
    threads[0][0]["retention"] = {"waiting_minutes": 60, "finished_minutes": 30}
    threads[1][0]["finished"] = {"due_at": "2030-01-01T00:00:00+00:00", "owner": "x"}
    write_export(path, threads)
    with pytest.raises(CommandError, match="--strict: nothing was imported"):
        call_command("import_checkpoints", str(path), "--strict")
    assert "refused: " in capsys.readouterr().err
    for thread_id in ("s-1", "s-2", "s-3"):
        assert target.thread_presence(thread_id) is None, thread_id
    # Without --strict the others are imported, the refused one named.
    with pytest.raises(CommandError, match="1 thread"):
        call_command("import_checkpoints", str(path))
    err = capsys.readouterr().err
    assert "thread 's-3'" in err and "lone surrogate" in err, err
    assert target.thread_presence("s-1") is not None
    assert target.thread_presence("s-3") is None


def test_a_database_source_names_the_thread_and_checkpoint(peer, peer_url, target, capsys):
    config = {"configurable": {"thread_id": "shaped", "checkpoint_ns": ""}}
    body = empty_checkpoint()
    peer.put(config, body, {"source": "input", "step": "minus one"}, {})
    peer.put(
        {"configurable": {"thread_id": "fine", "checkpoint_ns": ""}}, empty_checkpoint(), {}, {}
    )
    with pytest.raises(CommandError, match="1 thread"):
        call_command("import_checkpoints", peer_url)
    err = capsys.readouterr().err
    assert (
        f"refused: thread 'shaped', checkpoint {body['id']!r} (ns ''): its metadata's step is "
        "'minus one'" in err
    )
    assert target.get_tuple({"configurable": {"thread_id": "fine"}}) is not None


def test_missing_sources_and_folders_are_refused(target, tmp_path):
    missing = tmp_path / "missing.sqlite3"
    with pytest.raises(CommandError, match=f"SQLite store file '{missing}' does not exist"):
        call_command("import_checkpoints", f"sqlite:///{missing}")
    assert not missing.exists()
    with pytest.raises(CommandError, match=f"SqliteSaver file '{missing}' does not exist"):
        call_command("import_checkpoints", f"langgraph+sqlite:///{missing}")
    assert not missing.exists()
    nowhere = tmp_path / "no" / "such" / "folder"
    with pytest.raises(CommandError, match=f"the folder '{nowhere}' does not exist"):
        call_command("export_checkpoints", "--output", str(nowhere / "out.jsonl"))
    with pytest.raises(CommandError, match="cannot be written"):
        call_command("export_checkpoints", "--output", str(tmp_path))


# -- bounds -------------------------------------------------------------------------------
def zst(path: Path, *parts: bytes, repeat: tuple[bytes, int] | None = None) -> Path:
    """A .zst of ``parts``, then ``repeat[0]`` written ``repeat[1]`` times (a bomb: small)."""
    with open(path, "wb") as raw, zstandard.ZstdCompressor(level=3).stream_writer(raw) as out:
        for part in parts:
            out.write(part)
        if repeat is not None:
            for _ in range(repeat[1]):
                out.write(repeat[0])
    return path


def line(record: dict) -> bytes:
    return json.dumps(record).encode() + b"\n"


MIB = 1024 * 1024


@pytest.mark.django_db(transaction=True)
def test_a_line_past_the_checkpoint_bound_is_refused_without_reading_it_whole(
    tmp_path, capsys, settings
):
    settings.CHECKPOINTS = {**settings.CHECKPOINTS, "MAX_CHECKPOINT_BYTES": MIB}
    first = thread_records("before")
    path = zst(
        tmp_path / "bomb.jsonl.zst",
        line(header()),
        *map(line, first),
        b'{"kind": "thread", "thread_id": "bomb", "x": "',
        repeat=(b"x" * MIB, 200),
    )
    assert path.stat().st_size < 100_000
    tracemalloc.start()
    try:
        with pytest.raises(CommandError, match="1 thread"):
            call_command("import_checkpoints", str(path))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # A line is read up to the bound (a checkpoint at 1 MiB, in base64, plus its record),
    # never the 200 MiB it claims.
    assert peak < 40 * MIB
    captured = capsys.readouterr()
    assert f"refused: {path}:5: the line is longer than" in captured.err
    assert "nothing after this line was read" in captured.err
    assert "Imported 1 thread(s)" in captured.out


@pytest.mark.django_db(transaction=True)
def test_a_file_past_max_bytes_is_refused_and_blank_lines_are_skipped(tmp_path, capsys):
    blank = 64 * MIB
    path = zst(
        tmp_path / "blank.jsonl.zst",
        line(header()),
        repeat=(b"\n" * MIB, blank // MIB),
    )
    with open(path, "ab") as raw, zstandard.ZstdCompressor().stream_writer(raw) as out:
        for record in thread_records("after") + thread_records(
            "bad", BAD["format-version-text"][0]
        ):
            out.write(line(record))
    with pytest.raises(CommandError, match="1 thread"):
        call_command("import_checkpoints", str(path))
    captured = capsys.readouterr()
    assert "Imported 1 thread(s)" in captured.out
    # Line numbers count the blank lines: header, the blanks, "after", then "bad".
    assert f"refused: {path}:{1 + blank + 3 + 2}: thread 'bad'" in captured.err
    with pytest.raises(CommandError, match="1 thread"):
        call_command("import_checkpoints", str(path), "--max-bytes", str(10 * MIB))
    captured = capsys.readouterr()
    assert f"holds more than {10 * MIB} bytes decompressed" in captured.err
    assert f"refused: {path}:" in captured.err


def test_export_names_a_thread_it_cannot_export(peer, peer_url, tmp_path, capsys):
    body = empty_checkpoint()
    body["ts"] = "soon"
    peer.put({"configurable": {"thread_id": "bad-ts", "checkpoint_ns": ""}}, body, {}, {})
    peer.put(
        {"configurable": {"thread_id": "fine", "checkpoint_ns": ""}}, empty_checkpoint(), {}, {}
    )
    out = tmp_path / "out.jsonl"
    with pytest.raises(CommandError, match="1 thread\\(s\\) not exported"):
        call_command(
            "export_checkpoints",
            "--source",
            peer_url,
            "--output",
            str(out),
            "--since",
            "2000-01-01",
        )
    assert (
        "refused: thread 'bad-ts': a checkpoint's ts cannot be compared" in capsys.readouterr().err
    )
    threads = [json.loads(r) for r in out.read_text().splitlines()]
    assert [r["thread_id"] for r in threads if r.get("kind") == "thread"] == ["fine"]
