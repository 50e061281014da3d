"""jsonb's stored form: its canonical text."""

from __future__ import annotations

import json
from typing import Any


def canonical_jsonb(value: Any) -> str:
    """jsonb's canonical text: object keys ordered by length then bytes, no
    duplicates, `", "` and `": "` separators (what PostgreSQL prints)."""
    if isinstance(value, dict):
        keys = sorted(value, key=lambda k: (len(k.encode()), k.encode()))
        items = ", ".join(
            f"{json.dumps(k, ensure_ascii=False)}: {canonical_jsonb(value[k])}" for k in keys
        )
        return "{" + items + "}"
    if isinstance(value, list):
        return "[" + ", ".join(canonical_jsonb(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


__all__ = ["canonical_jsonb"]
