"""One timeline: a timestamp is an int of milliseconds since the Unix epoch."""

import time

Timestamp = int


def now_ms() -> Timestamp:
    """The wall clock as a Timestamp."""
    return time.time_ns() // 1_000_000
