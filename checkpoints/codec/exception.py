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

    Where LangGraph reads a task's error back it expects the string LangGraph's own
    serializer stores, the original's ``repr()`` (``"ValueError('bad input')"``): ``text`` is
    that string, and the record compares equal to it, hashes like it and answers ``in``
    against it, so ``"bad input" in task.error`` and ``task.error == "ValueError(...)"`` hold.
    The original's ``repr()`` is stored (``"repr"``) only when it differs from
    ``Class('message')``, which it does for few exceptions.
    """

    def __init__(
        self,
        id: Sequence[str],
        message: str,
        kwargs: Mapping[str, Any] | None = None,
        repr_kwargs: Iterable[str] = (),
        cause: CheckpointedException | None = None,
        repr_text: str | None = None,
    ) -> None:
        super().__init__(message)
        self.repr_text = repr_text
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
    def text(self) -> str:
        """What LangGraph's serializer would have stored: the original's ``repr()``."""
        if self.repr_text is not None:
            return self.repr_text
        return self.derived_repr(self.id[-1] if self.id else "Exception", self.message)

    @staticmethod
    def derived_repr(cls_name: str, message: str) -> str:
        return f"{cls_name}({message!r})"

    def __contains__(self, part: object) -> bool:
        return isinstance(part, str) and part in self.text

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
            **({} if self.repr_text is None else {"repr": self.repr_text}),
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
            record.get("repr"),
        )

    def __str__(self) -> str:
        return f"{self.type_name}: {self.message}"

    def __repr__(self) -> str:
        return f"CheckpointedException({self.type_name}: {self.message!r})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            return self.text == other
        if not isinstance(other, CheckpointedException):
            return NotImplemented
        return (
            self.repr_text == other.repr_text
            and self.id == other.id
            and self.message == other.message
            and self.kwargs == other.kwargs
            and self.repr_kwargs == other.repr_kwargs
            and self.cause == other.cause
        )

    def __hash__(self) -> int:
        # Equal to its text, so it must hash like it.
        return hash(self.text)

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            type(self),
            (self.id, self.message, self.kwargs, self.repr_kwargs, self.cause, self.repr_text),
        )
