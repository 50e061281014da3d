"""The plan cache: repeated INSERT ... VALUES statements (the same text up
to its constants, or one prepared statement executed again) skip parsing
and all planning but their VALUES' constants (sql/insert_template.py).

An entry is keyed on the statement's shape and everything planning read
besides the text: the catalog's version (its seqno, which every DDL moves,
in this process or another), the session's database and search_path (name
resolution). Nothing else of a session reaches the planning of constants:
their casts are bound again per execution. A new catalog version makes
every older entry unreachable; the bounded LRU forgets them.

A prepared statement's INSERT (one exact text, executed again with new
parameters) has a second entry keyed on that text, the parameters' types
and the same catalog version, database and search_path: a `PreparedInsert`
(sql/insert_template.py), whose execution reads each `$n`'s text with its
column type's input function into the row planned the first time, with
no tokens, no tree and no binder. Whatever it cannot read goes to the
template, which plans and reports it as before.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from coordinator_lib.sql.insert_template import InsertTemplate, PreparedInsert, Shape, shape_of

_SHAPES_MAX = 128  # texts with their tokens: a prepared statement's come again
_ENTRIES_MAX = 512


@dataclass
class PlanCacheStats:
    """Counted for tests and /metrics-style inspection."""

    hits: int = 0
    misses: int = 0
    prepared_hits: int = 0  # hits that took a prepared INSERT's fast path


class PlanCache:
    """Templates of planned INSERTs (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._shapes: OrderedDict[str, Shape | None] = OrderedDict()
        self._entries: OrderedDict[tuple[Any, ...], InsertTemplate | None] = OrderedDict()
        self._prepared: OrderedDict[tuple[Any, ...], PreparedInsert | None] = OrderedDict()
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

    def prepared(self, key: tuple[Any, ...]) -> tuple[bool, PreparedInsert | None]:
        """(whether `key` was seen, its fast path if it has one); a fast
        path found counts as a hit."""
        with self._lock:
            if key not in self._prepared:
                return False, None
            self._prepared.move_to_end(key)
            fast = self._prepared[key]
            if fast is not None:
                self.stats.hits += 1
                self.stats.prepared_hits += 1
            return True, fast

    def put_prepared(self, key: tuple[Any, ...], fast: PreparedInsert | None) -> None:
        with self._lock:
            self._prepared[key] = fast
            if len(self._prepared) > _ENTRIES_MAX:
                self._prepared.popitem(last=False)
