"""Unit tests for the changes diff and the admin's value rendering."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from langchain_core.messages import AIMessage, HumanMessage

from checkpoints.admin.display import collapsible, collapsible_map
from checkpoints.codec.render import pretty, preview, readable
from checkpoints.timetravel.diff import MISSING, baseline, channel_changes, value_change


def test_unchanged_channels_are_left_out():
    assert channel_changes({"a": 1, "b": [1]}, {"a": 1, "b": [1]}) == []


def test_appended_list_items_are_reported_as_added():
    before = {"messages": [HumanMessage(content="hi")]}
    after = {"messages": [HumanMessage(content="hi"), AIMessage(content="hello")]}
    [change] = channel_changes(before, after)
    assert change.channel == "messages"
    assert change.kind == "list"
    assert change.appended == [AIMessage(content="hello")]
    assert change.dropped == []
    assert change.summary == "1 item(s) added"


def test_list_rewritten_after_a_prefix_reports_dropped_and_appended():
    change = value_change("xs", [1, 2, 3], [1, 9])
    assert change.appended == [9]
    assert change.dropped == [2, 3]
    assert change.summary == "1 item(s) added, 2 item(s) removed"


def test_dict_keys_added_changed_and_removed():
    change = value_change("notes", {"a": 1, "b": 2, "c": 3}, {"a": 1, "b": 20, "d": 4})
    assert change.kind == "dict"
    assert change.added_keys == {"d": 4}
    assert change.removed_keys == {"c": 3}
    assert change.changed_keys == {"b": (2, 20)}
    assert change.summary == "1 key(s) added, 1 key(s) changed, 1 key(s) removed"


def test_scalar_replaced_and_type_change_counts():
    [change] = channel_changes({"turn": 1}, {"turn": 2})
    assert (change.kind, change.before, change.after) == ("value", 1, 2)
    # 1 == True in Python, but a bool replacing an int is a change a reader must see.
    [flip] = channel_changes({"flag": 1}, {"flag": True})
    assert flip.kind == "value"


def test_new_and_cleared_channels():
    changes = {c.channel: c for c in channel_changes({"old": 1}, {"new": [1]})}
    assert changes["new"].kind == "added" and changes["new"].after == [1]
    assert changes["old"].kind == "removed" and changes["old"].before == 1
    assert value_change("x", MISSING, 5).summary == "new channel"


def test_values_are_ordered_by_channel_name():
    changes = channel_changes({}, {"b": 1, "a": 2, "c": 3})
    assert [c.channel for c in changes] == ["a", "b", "c"]


def test_readable_turns_messages_and_datetimes_into_json():
    data = readable([HumanMessage(content="hi"), datetime(2026, 1, 2, tzinfo=UTC)])
    json.dumps(data)  # plain JSON data all the way down
    assert data[0] == {"$type": "HumanMessage", "content": "hi", "type": "human"}
    assert data[1]["$type"] == "datetime"
    assert data[1]["v"].startswith("2026-01-02T00:00:00")


def test_readable_falls_back_to_repr_for_what_the_codec_refuses():
    class Odd:
        def __repr__(self):
            return "<Odd thing>"

    assert readable({"k": Odd(), "n": [1, Odd()]}) == {"k": "<Odd thing>", "n": [1, "<Odd thing>"]}


def test_collapsible_renders_escaped_json_in_details():
    html = collapsible("messages", ["<script>"])
    assert html.startswith('<details class="cs-value">')
    assert "list of 1 item(s)" in html
    assert "&lt;script&gt;" in html and "<script>" not in html
    assert "open" in collapsible("x", 1, open=True).split(">")[0]


def test_collapsible_map_one_block_per_key_and_empty_text():
    html = collapsible_map({"b": 1, "a": {"x": 1}})
    assert html.count("<details") == 2
    assert html.index("<strong>a</strong>") < html.index("<strong>b</strong>")
    assert "(none)" in collapsible_map({})


def test_preview_and_pretty():
    assert preview({"a": 1}) == "object with 1 key(s)"
    assert preview("x" * 200).endswith("…") and len(preview("x" * 200)) == 80
    assert pretty({"a": [1]}) == '{\n  "a": [\n    1\n  ]\n}'


def test_a_rollback_is_measured_against_the_head_it_replaced():
    rolled = {"source": "rollback", "rollback": {"target": "t1", "replaced_head": "h9"}}
    assert baseline(rolled, "t1") == ("h9", "replaced head")
    assert baseline({"source": "loop"}, "p1") == ("p1", "parent")
    assert baseline({}, None) == (None, "parent")
