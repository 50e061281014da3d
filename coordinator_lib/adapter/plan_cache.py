"""The plan cache: repeated INSERT ... VALUES statements (the same text up
to its constants, or one prepared statement executed again) skip parsing
and all planning but their VALUES' constants (sql/insert_template.py).

An entry is keyed on the statement's shape and everything planning read
besides the text: the catalog's version (its seqno, which every DDL moves,
in this process or another), the session's database and search_path (name
resolution). Nothing else of a session reaches the planning of constants:
their casts are bound again per execution. A new catalog version makes
every older entry unreachable; the bounded LRU forgets them.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from coordinator_lib.sql.insert_template import InsertTemplate, Shape, shape_of

_SHAPES_MAX = 128  # texts with their tokens: a prepared statement's come again
_ENTRIES_MAX = 512


@dataclass
class PlanCacheStats:
    """Counted for tests and /metrics-style inspection."""

    hits: int = 0
    misses: int = 0


class PlanCache:
    """Templates of planned INSERTs (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._shapes: OrderedDict[str, Shape | None] = OrderedDict()
        self._entries: OrderedDict[tuple[Any, ...], InsertTemplate | None] = OrderedDict()
        self.stats = PlanCacheStats()

    def shape(self, text: str) -> Shape | None:
        """`text`'s shape, tokenized once per distinct text (a prepared
        statement's every Execute sends the same one)."""
        with self._lock:
            if text in self._shapes:
                self._shapes.move_to_end(text)
                return self._shapes[text]
        shape = shape_of(text)
        with self._lock:
            self._shapes[text] = shape
            if len(self._shapes) > _SHAPES_MAX:
                self._shapes.popitem(last=False)
        return shape

    def get(self, key: tuple[Any, ...]) -> InsertTemplate | None:
        with self._lock:
            template = self._entries.get(key)
            if template is None:
                self.stats.misses += 1
                return None
            self._entries.move_to_end(key)
            self.stats.hits += 1
            return template

    def known(self, key: tuple[Any, ...]) -> bool:
        """Whether `key` was seen (a template, or a statement that has none)."""
        with self._lock:
            return key in self._entries

    def put(self, key: tuple[Any, ...], template: InsertTemplate | None) -> None:
        with self._lock:
            self._entries[key] = template
            if len(self._entries) > _ENTRIES_MAX:
                self._entries.popitem(last=False)
