"""The processes `make run`'s script started, found by a marker in their
environment (everything it starts inherits it: servers, Dagster's daemon,
code server, run workers, JVMs)."""

from __future__ import annotations

from pathlib import Path

MARKER_VARIABLE = "TIDEMARK_TEST_MARKER"


def marked(marker: str) -> list[int]:
    """Live processes carrying `marker` in their environment."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in environ and state != "Z":
            found.append(int(entry.name))
    return found


def jvms(marker: str) -> list[int]:
    """The marked processes that are a JVM (Spark's driver)."""
    return [pid for pid in marked(marker) if _command(pid) == "java"]


def _command(pid: int) -> str:
    try:
        return (Path("/proc") / str(pid) / "comm").read_text().strip()
    except OSError:
        return ""
