"""Re-exports of the store contract under its old path (`checkpoints.store.contract`)."""

from checkpoints.store.contract import (
    DURABILITY_KEY,
    StoreSaver,
    strict_serializer,
)
from checkpoints.store.planning import (
    DELETE_ROUNDS,
    FORMAT_ERROR_HINT,
    FORMAT_GENERATION,
    MAX_THREAD_ID_BYTES,
    FinishedEntry,
    ThreadHoldings,
    ThreadRetention,
    check_thread_id,
    config_keys,
    json_metadata,
    metadata_matches,
    utcnow,
    validate_filter,
)

__all__ = [
    "DELETE_ROUNDS",
    "DURABILITY_KEY",
    "FORMAT_ERROR_HINT",
    "FORMAT_GENERATION",
    "MAX_THREAD_ID_BYTES",
    "FinishedEntry",
    "StoreSaver",
    "ThreadHoldings",
    "ThreadRetention",
    "check_thread_id",
    "config_keys",
    "json_metadata",
    "metadata_matches",
    "strict_serializer",
    "utcnow",
    "validate_filter",
]
