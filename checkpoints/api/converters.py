"""URL converters for thread ids, which may hold any character, slashes included."""

from django.urls import register_converter
from django.urls.converters import PathConverter

ACTION_SUFFIXES = (
    "history",
    "state",
    "rollback",
    "fork",
    "bulk-update",
    "finish",
    "retention",
    "hold",
)


class ThreadIdConverter(PathConverter):
    # Any character, newlines included ("." would stop at one and answer an HTML 404).
    regex = r"[\s\S]+"


class ThreadDetailIdConverter(PathConverter):
    # One segment is always a thread id; a longer id must not end in "/<suffix>".
    regex = r"(?:[^/]+|[\s\S]+" + "".join(f"(?<!/{suffix})" for suffix in ACTION_SUFFIXES) + ")"


register_converter(ThreadIdConverter, "thread_id")
register_converter(ThreadDetailIdConverter, "thread_detail_id")
