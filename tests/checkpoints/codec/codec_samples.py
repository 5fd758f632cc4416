"""Classes the codec tests store and revive; the tests put this module on the allowlist."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum, Flag, IntEnum
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict, PrivateAttr


class Color(Enum):
    RED = "red"
    GREEN = "green"
    PAIR = (1, 2)


class Level(IntEnum):
    LOW = 1
    HIGH = 2


class Perm(Flag):
    READ = 1
    WRITE = 2


class Profile(BaseModel):
    name: str
    when: datetime | None = None
    payload: Any = None
    _note: str = PrivateAttr(default="")


class Loose(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)

    count: int = 0


@dataclass(frozen=True)
class Point:
    x: int
    y: int
    label: str = ""


@dataclass
class Box:
    content: Any
    tags: list[Any] = field(default_factory=list)


class Pair(NamedTuple):
    left: Any
    right: Any = None


class StepFailed(Exception):
    def __init__(self, message: str, *, step: str, attempts: int) -> None:
        super().__init__(message)
        self.step = step
        self.attempts = attempts
