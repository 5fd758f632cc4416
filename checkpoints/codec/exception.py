"""Exceptions stored in checkpoints, read back as records: :class:`CheckpointedException`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any


class CheckpointedException(Exception):
    """An exception read back from a checkpoint, carrying the record it was stored as.

    The original class is never imported or rebuilt: ``id`` names it (module parts, then the
    class name), ``message`` is its ``str()``, ``kwargs`` its public attributes (an attribute
    that held an exception is itself a ``CheckpointedException``), ``repr_kwargs`` names the
    attributes kept only as their ``repr()``, and ``cause`` is the exception it was raised
    from, or None. Writing one again stores the same record.
    """

    def __init__(
        self,
        id: Sequence[str],
        message: str,
        kwargs: Mapping[str, Any] | None = None,
        repr_kwargs: Iterable[str] = (),
        cause: CheckpointedException | None = None,
    ) -> None:
        super().__init__(message)
        self.id = list(id)
        self.message = message
        self.kwargs = dict(kwargs or {})
        self.repr_kwargs = list(repr_kwargs)
        self.cause = cause
        # Tracebacks then print the stored chain the way Python printed the original.
        self.__cause__ = cause

    @property
    def type_name(self) -> str:
        """The original exception's dotted class name, such as ``builtins.TimeoutError``."""
        return ".".join(self.id)

    @property
    def record(self) -> dict[str, Any]:
        """The readable record: exception-valued attributes and the cause as nested records."""
        return {
            "id": list(self.id),
            "message": self.message,
            "kwargs": {
                name: value.record if isinstance(value, CheckpointedException) else value
                for name, value in self.kwargs.items()
            },
            "repr_kwargs": list(self.repr_kwargs),
            "cause": None if self.cause is None else self.cause.record,
        }

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> CheckpointedException:
        """Build one from a record shaped like :attr:`record` (the cause is rebuilt too)."""
        cause = record.get("cause")
        return cls(
            record["id"],
            record["message"],
            record.get("kwargs") or {},
            record.get("repr_kwargs") or (),
            None if cause is None else cls.from_record(cause),
        )

    def __str__(self) -> str:
        return f"{self.type_name}: {self.message}"

    def __repr__(self) -> str:
        return f"CheckpointedException({self.type_name}: {self.message!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CheckpointedException):
            return NotImplemented
        return (
            self.id == other.id
            and self.message == other.message
            and self.kwargs == other.kwargs
            and self.repr_kwargs == other.repr_kwargs
            and self.cause == other.cause
        )

    def __hash__(self) -> int:
        return hash((tuple(self.id), self.message))

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.id, self.message, self.kwargs, self.repr_kwargs, self.cause))
