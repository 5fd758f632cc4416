"""schemathesis hooks of the PostgreSQL fuzz runs (loaded through SCHEMATHESIS_HOOKS)."""

import os

import schemathesis

from tests.fuzz_fixtures import CHANGED_HEADER


@schemathesis.check
def nothing_stored_changed_on_4xx(ctx, response, case):
    """A refused request leaves every stored row as it was (see StoredRowsGuard)."""
    changed = response.headers.get(CHANGED_HEADER.lower())
    if changed and 400 <= response.status_code < 500:
        raise AssertionError(
            f"answered {response.status_code} but changed stored rows in {changed[0]}"
        )


if os.environ.get("FUZZ_STATEFUL_LISTS") == "1":
    # The stateful run chains calls from the thread list: a random owner or offset almost
    # always lists nothing, and a random page start, source, namespace or metadata filter
    # finds no checkpoint, leaving nothing to follow. The links fill in the real ids; the
    # stateless runs fuzz these parameters (this hook is off there).
    RANDOM_MISSES = {"owner", "offset", "before", "source", "checkpoint_ns"}

    @schemathesis.hook("map_query").apply_to(
        operation_id=["threads_list", "threads_history", "threads_state"]
    )
    def follow_real_ids(ctx, query):
        if not query:
            return query
        return {
            key: value
            for key, value in query.items()
            if key not in RANDOM_MISSES and not key.startswith("metadata.")
        }

    @schemathesis.hook("map_body").apply_to(operation_id=["threads_rollback", "threads_fork"])
    def root_namespace(ctx, body):
        if isinstance(body, dict):
            body.pop("checkpoint_ns", None)
        return body
