"""Catalog ids: `u1`, `u2` for user objects, `s1` for system objects, `t1`
for transient ones (peeks, subscribes)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

_PATTERN = re.compile(r"^([ust])(\d+)$")

IdKind = Literal["u", "s", "t"]


@dataclass(frozen=True, order=True, slots=True)
class GlobalId:
    kind: IdKind
    value: int

    @staticmethod
    def user(value: int) -> GlobalId:
        return GlobalId("u", value)

    @staticmethod
    def system(value: int) -> GlobalId:
        return GlobalId("s", value)

    @staticmethod
    def transient(value: int) -> GlobalId:
        return GlobalId("t", value)

    @staticmethod
    def parse(text: str) -> GlobalId:
        match = _PATTERN.match(text)
        if not match:
            raise ValueError(f"not a GlobalId: {text!r} (expected u<n>, s<n> or t<n>)")
        return GlobalId(match.group(1), int(match.group(2)))  # type: ignore[arg-type]

    def __str__(self) -> str:
        return f"{self.kind}{self.value}"

    def __repr__(self) -> str:
        return str(self)
