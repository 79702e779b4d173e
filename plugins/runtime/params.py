"""DAG params as the user typed them, and the conf keys a trigger may carry.

Operators read params from ``context["params"]`` (validated by the DAG's JSON schema, typed as given)
instead of through Jinja templates: a templated string that looks like a Python literal would be
evaluated by native rendering (``"3.10"`` -> ``3.1``, ``"None"`` -> None), so params reach the code
exactly as typed.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


def is_true(value: object) -> bool:
    """A boolean param: a real bool, or its text ("True", "true", "1")."""
    return str(value).strip().lower() in ("true", "1")


@dataclass(frozen=True)
class FromParam:
    """A setting whose value is the DAG param ``name`` at run time (see :func:`resolve_settings`)."""

    name: str


def resolve_settings(settings: Mapping[str, Any], params: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` with every :class:`FromParam` replaced by that param's value.

    :raises KeyError: a setting names a param the DAG does not define (a DAG authoring error).
    """
    out = {}
    for key, value in settings.items():
        if isinstance(value, FromParam):
            if value.name not in params:
                raise KeyError(f"setting {key!r} reads param {value.name!r}, which the DAG does not define")
            out[key] = params[value.name]
        else:
            out[key] = value
    return out


def unknown_conf_keys(conf: Mapping[str, Any] | None, params: Iterable[str]) -> list[str]:
    """One message per key of the trigger's ``conf`` that is not a DAG param, with the closest param:
    ``"unknown param 'broker'; did you mean 'brokers'?"``. Airflow accepts such keys silently, so a typo
    would otherwise run the operation with the default (e.g. every broker)."""
    known = sorted(params)
    out = []
    for key in sorted(conf or {}):
        if key in known:
            continue
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else f"; params are {known}"
        out.append(f"unknown param {key!r}{hint}")
    return out
