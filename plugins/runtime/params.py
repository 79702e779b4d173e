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


#: Bounds of a number param that Airflow's trigger form enforces by *changing* the value (its number field
#: clamps -5 to a minimum of 10, 999999999 to a maximum of 86400): the form's schema leaves them out, keeps them
#: under :data:`BOUNDS_KEY` (a keyword JSON Schema ignores), and ``check_and_lock`` refuses a value outside them
#: with a message (:func:`out_of_range`), so a typed value is never changed silently.
CLAMPED_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
BOUNDS_KEY = "x-kafka-ops-bounds"


def form_schema(schema: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """``schema`` for the trigger form: its top-level bounds (:data:`CLAMPED_BOUNDS`) moved under
    :data:`BOUNDS_KEY`, and the range as text for the param's description (``"10 to 86400"``, ``"at least 1"``;
    "" without bounds). Bounds inside ``items`` stay (a list is typed as JSON, never clamped)."""
    bounds = {k: schema[k] for k in CLAMPED_BOUNDS if k in schema}
    if not bounds:
        return dict(schema), ""
    out = {k: v for k, v in schema.items() if k not in CLAMPED_BOUNDS}
    out[BOUNDS_KEY] = bounds
    low, high = bounds.get("minimum", bounds.get("exclusiveMinimum")), bounds.get("maximum",
                                                                                  bounds.get("exclusiveMaximum"))
    text = (f"{low} to {high}" if low is not None and high is not None else
            f"at least {low}" if low is not None else f"at most {high}")
    return out, text


def out_of_range(schemas: Mapping[str, Mapping[str, Any]], values: Mapping[str, Any]) -> list[str]:
    """One message per value of ``values`` outside the bounds its param's form schema keeps under
    :data:`BOUNDS_KEY` (``"param healthcheck_timeout_s: -5 is less than the minimum of 10"``); checked with
    ``jsonschema`` (draft 7); nulls and params without bounds pass."""
    from jsonschema import Draft7Validator

    out = []
    for name in sorted(values):
        bounds = (schemas.get(name) or {}).get(BOUNDS_KEY)
        value = values[name]
        if not bounds or value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        out += [f"param {name}: {error.message}" for error in Draft7Validator(dict(bounds)).iter_errors(value)]
    return out
