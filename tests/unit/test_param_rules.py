"""Params refused instead of changed: number bounds kept out of the trigger form and checked by check_and_lock
(runtime.params), and combinations that can never pass (kafka_ops.param_rules)."""

from __future__ import annotations

from kafka_ops.param_rules import impossible_combinations
from runtime.params import BOUNDS_KEY, form_schema, out_of_range
from runtime.settings_table import param

GATE = {"healthcheck_interval_s": 5, "healthcheck_timeout_s": 900, "lag_ok_consecutive": 3, "consumer_groups": []}


def test_the_form_schema_has_no_bounds_to_clamp_to_and_the_description_names_them() -> None:
    schema, text = form_schema({"type": "integer", "minimum": 10, "maximum": 86400})
    assert schema == {"type": "integer", BOUNDS_KEY: {"minimum": 10, "maximum": 86400}} and text == "10 to 86400"
    assert form_schema({"type": ["null", "integer"], "minimum": 1})[1] == "at least 1"
    listed = {"type": "array", "items": {"type": "integer", "minimum": 0}}
    assert form_schema(listed) == (listed, ""), "a list's items are typed as JSON, never clamped"
    timeout = param("healthcheck_timeout_s")
    assert "minimum" not in timeout.schema and timeout.schema[BOUNDS_KEY] == {"minimum": 10, "maximum": 86400}
    assert "(10 to 86400; a value outside is refused by check_and_lock)" in timeout.description


def test_values_outside_their_bounds_are_named() -> None:
    schemas = {name: param(name).schema for name in ("healthcheck_timeout_s", "healthcheck_interval_s", "soak_s",
                                                     "wave_bytes", "dry_run")}
    assert out_of_range(schemas, {"healthcheck_timeout_s": 900, "healthcheck_interval_s": 5, "soak_s": 0,
                                  "wave_bytes": None, "dry_run": True}) == []
    assert out_of_range(schemas, {"healthcheck_timeout_s": -5, "healthcheck_interval_s": 0,
                                  "soak_s": 999999999, "wave_bytes": 0}) == [
        "param healthcheck_interval_s: 0 is less than the minimum of 1",
        "param healthcheck_timeout_s: -5 is less than the minimum of 10",
        "param soak_s: 999999999 is greater than the maximum of 86400",
        "param wave_bytes: 0 is less than the minimum of 1",
    ]


def test_combinations_that_can_never_pass_are_refused() -> None:
    assert impossible_combinations(GATE) == []
    assert impossible_combinations({}) == [], "a DAG without those params"
    short = impossible_combinations({**GATE, "healthcheck_timeout_s": 10})
    assert len(short) == 1 and "cannot pass the lag gate" in short[0] and "more than 10 s" in short[0]
    assert impossible_combinations({**GATE, "healthcheck_timeout_s": 11}) == []
    assert impossible_combinations({**GATE, "healthcheck_timeout_s": 10, "consumer_groups": None}) == [], \
        "no lag gate"
    assert impossible_combinations({**GATE, "lag_ok_consecutive": 1, "healthcheck_timeout_s": 10}) == []
    slow = impossible_combinations({**GATE, "healthcheck_interval_s": 600, "healthcheck_timeout_s": 60})
    assert any("healthcheck_interval_s 600 is longer than healthcheck_timeout_s 60" in m for m in slow)
    waves = impossible_combinations({"verify_interval_s": 600, "verify_timeout_s": 10})
    assert waves == ["verify_interval_s 600 is longer than verify_timeout_s 10: a wave would be checked once; "
                     "lower the interval or raise the timeout"]
