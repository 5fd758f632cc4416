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
    # The stateful run starts its chains from the thread list: a random owner or offset
    # almost always lists nothing, leaving no thread id to follow. The stateless runs
    # fuzz those parameters (this hook is off there).
    @schemathesis.hook("map_query").apply_to(operation_id="threads_list")
    def list_real_threads(ctx, query):
        if not query:
            return query
        return {key: value for key, value in query.items() if key not in ("owner", "offset")}
