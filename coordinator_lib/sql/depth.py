"""How deeply a statement may nest, and what happens beyond.

sqlglot's parser and the planner recurse: about 22 Python frames per
parenthesis level, 25 per nested subquery. Python's default limit (1000
frames) stopped at 45 parentheses; PostgreSQL takes thousands. The servers
call `allow_deep_statements` before starting their threads: the recursion
limit becomes RECURSION_LIMIT (about 2,700 nested parentheses, 2,400 nested
subqueries, any number of OR terms) and every thread started afterwards gets
a stack that holds that many frames even where they recurse through C (the
main thread keeps the stack the OS gave it). Deeper than that, a statement
fails with PostgreSQL's 54001 "stack depth limit exceeded", never an
internal error.
"""

from __future__ import annotations

import sys
import threading

from coordinator_lib.sql.errors import StackDepthExceeded

RECURSION_LIMIT = 60_000
THREAD_STACK_BYTES = 512 * 1024 * 1024  # address space; pages are used only as needed


def allow_deep_statements() -> None:
    """Raise the recursion limit and the stack of threads started from now on."""
    if sys.getrecursionlimit() < RECURSION_LIMIT:
        sys.setrecursionlimit(RECURSION_LIMIT)
    if threading.stack_size() < THREAD_STACK_BYTES:
        threading.stack_size(THREAD_STACK_BYTES)


def too_deep() -> StackDepthExceeded:
    """The error for a statement that exhausted the recursion limit."""
    return StackDepthExceeded(
        "stack depth limit exceeded",
        hint=f"The statement nests deeper than {RECURSION_LIMIT} parser frames allow; "
        "simplify it (fewer nested parentheses or subqueries).",
    )
