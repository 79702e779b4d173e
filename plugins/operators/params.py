"""Reading rendered DAG params inside operators."""

from __future__ import annotations


def is_true(value: object) -> bool:
    """A boolean param as rendered: a real bool (native rendering) or its text ("True", "true", "1")."""
    return str(value).strip().lower() in ("true", "1")
