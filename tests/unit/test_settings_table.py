"""The one settings table (``runtime.settings_table``) and the cluster-operator base that reads it
(``operators.cluster_operator``)."""

from __future__ import annotations

import pytest
from airflow.sdk.exceptions import AirflowFailException
from operations.reassignment_params import reassignment_params
from operations.roll_params import role_params, roll_params
from operators.cluster_operator import ClusterOperator
from runtime.params import BOUNDS_KEY, CLAMPED_BOUNDS, FromParam
from runtime.settings_table import SETTINGS, default, param, params, value_or_default
from runtime.waiting import Check


def test_every_param_of_the_dags_comes_from_the_table_with_its_default() -> None:
    for name, p in {**roll_params(), **role_params(), **reassignment_params("the brokers")}.items():
        assert p.value == SETTINGS[name].default, name
        for key, value in SETTINGS[name].schema.items():
            # number bounds are kept beside the form's schema (runtime.params.form_schema: the form would clamp)
            assert (p.schema[key] if key not in CLAMPED_BOUNDS else p.schema[BOUNDS_KEY][key]) == value, (name, key)
    assert reassignment_params("Ids of the new brokers")["brokers"].schema["minItems"] == 1
    assert reassignment_params("Ids of the new brokers")["brokers"].description == "Ids of the new brokers"
    assert "minItems" not in roll_params()["brokers"].schema, "an override does not leak into the table"


def test_defaults_and_what_a_null_means() -> None:
    assert default("healthcheck_timeout_s") == 900 and default("command_timeout_s") == 300
    assert value_or_default("soak_s", {}) == 0
    assert value_or_default("soak_s", {"soak_s": None}) == 0, "soak_s has no null: null is the default"
    assert value_or_default("consumer_groups", {"consumer_groups": None}) is None, "null = no lag gate"
    assert value_or_default("consumer_groups", {}) == []
    assert value_or_default("wave_bytes", {"wave_bytes": None}) is None
    assert value_or_default("max_parallel", {"max_parallel": 4}) == 4
    assert value_or_default("anything", {"anything": 7}) == 7, "a setting outside the table is as given"
    with pytest.raises(KeyError, match="no setting 'helthcheck_timeout_s' in the settings table"):
        default("helthcheck_timeout_s")


def test_a_setting_that_is_no_param_is_refused_as_one() -> None:
    with pytest.raises(ValueError, match="'command_timeout_s' is not a param"):
        param("command_timeout_s")
    with pytest.raises(KeyError, match="no setting 'nope'"):
        params("cluster", "nope")
    assert list(params("cluster", "dry_run")) == ["cluster", "dry_run"]
    assert params("dry_run")["dry_run"] is not params("dry_run")["dry_run"], "fresh objects per DAG"


class Probe(ClusterOperator):
    def execute(self, context):  # pragma: no cover - not run through Airflow here
        return None


def test_the_base_resolves_settings_with_table_defaults_and_fails_waits_with_their_reason() -> None:
    op = Probe(task_id="probe", settings={"cluster": FromParam("cluster"), "soak_s": None, "dry_run": "true"})
    cfg = op.resolve({"params": {"cluster": "kafka_x"}})
    assert cfg == {"cluster": "kafka_x", "soak_s": None, "dry_run": "true"}
    assert op.dry_run is True and op.interval_s == 5.0 and op.timeout_s == 900.0
    assert op.setting("soak_s") == 0 and op.setting("lag_ok_consecutive") == 3
    op.interval_s, op.timeout_s = 0.01, 0.05
    with pytest.raises(AirflowFailException, match="the thing: still not"):
        op.wait(lambda: Check(False, "still not"), "the thing", sleep=lambda s: None)
    assert op.wait(lambda: Check(True, "fine"), "the thing").message == "fine"

    def refused():
        raise AirflowFailException("consumer groups unknown to Burrow (local): ['x']")

    with pytest.raises(AirflowFailException, match=r"^consumer groups unknown to Burrow \(local\): \['x'\]$"):
        op.ask(refused, "Burrow")

    def fatal():
        raise ValueError("no such topic")  # not transient (runtime.failures): no retry

    with pytest.raises(AirflowFailException, match="no such topic"):
        op.ask(fatal, "the topic", sleep=lambda s: None)


def test_a_dag_that_reads_a_param_it_lacks_is_an_authoring_error() -> None:
    op = Probe(task_id="probe", settings={"cluster": FromParam("cluster"), "roles": FromParam("roles")})
    with pytest.raises(KeyError, match="reads param 'roles'"):
        op.resolve({"params": {"cluster": "c"}})
