"""Pure parts of the plugins' operators, sensors and trigger: no servers.

- ``operators.broker_service.remote_command``: the exact text sent over SSH, checked by parsing it with
  ``shlex`` and by letting real shells (dash and bash) run it with a stand-in ``bash`` on PATH that only
  prints the arguments it got, so hostile commands are never executed.
- ``kafka_ops.restart_plan.resolve_groups``, ``sensors.probes.ProbeSpec`` validation, the trigger's
  serialization, the non-deferrable sensor's OK-streak counting, ``PreviousBrokerDoneSensor`` with a stub
  task instance (its real ``ti.get_task_states`` needs the Airflow API: covered by the DAG tests).

The cluster lock is tested against a real ZooKeeper in tests/integration/test_airflow_components.py
(kazoo ships no in-memory test double).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from airflow.sdk.exceptions import AirflowFailException
from hooks.kafka_admin import normalize_log_dirs
from kafka_ops.restart_plan import resolve_groups
from operators.broker_service import BrokerServiceOperator, remote_command
from sensors import cluster as cluster_sensors
from sensors.probes import KINDS, ProbeResult, ProbeSpec
from sensors.turn import PreviousBrokerDoneSensor
from triggers.cluster_probe import ClusterProbeTrigger

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

HOSTILE = [
    "kafka-service stop",
    'echo "double quoted" \'single quoted\'',
    "it's",
    "$(touch /tmp/kafka-ops-pwned) `touch /tmp/kafka-ops-pwned`",
    "a; b && c || d | e & f",
    "line one\nline two",
    "back\\slash \\' \\\" $HOME ${PATH} * ? [a] ~",
    "",
    "   leading and trailing spaces   ",
    "'; rm -rf / #",
    "ünïcødé ✓",
]


# --- remote_command --------------------------------------------------------------------------------


@pytest.mark.parametrize("command", HOSTILE)
def test_remote_command_parses_back_to_one_bash_c_argument(command: str) -> None:
    text = remote_command(command, 3)
    assert shlex.split(text) == ["KAFKA_BROKER_ID=3", "bash", "-c", command]
    assert text.startswith("KAFKA_BROKER_ID=3 bash -c ")


@pytest.fixture
def fake_bash(tmp_path: Path) -> Path:
    """A directory with a ``bash`` that prints $KAFKA_BROKER_ID and its arguments, NUL-separated."""
    stub = tmp_path / "bin" / "bash"
    stub.parent.mkdir()
    stub.write_text('#!/bin/sh\nprintf "%s\\0" "$KAFKA_BROKER_ID" "$@"\n')
    stub.chmod(0o755)
    return stub.parent


@pytest.mark.parametrize("login_shell", ["/bin/sh", "/bin/bash"])
@pytest.mark.parametrize("command", HOSTILE)
def test_remote_shell_hands_bash_exactly_the_command(fake_bash: Path, login_shell: str, command: str,
                                                     tmp_path: Path) -> None:
    """What sshd does with the text: ``<login shell> -c TEXT``; bash must get ``-c`` and the command."""
    if not Path(login_shell).exists():
        pytest.skip(f"{login_shell} not installed")
    env = {**os.environ, "PATH": f"{fake_bash}:{os.environ['PATH']}"}
    out = subprocess.run([login_shell, "-c", remote_command(command, 12)], env=env, capture_output=True,
                         check=True, cwd=tmp_path, timeout=10).stdout
    assert out.decode().split("\0")[:-1] == ["12", "-c", command]
    assert list(tmp_path.iterdir()) == [fake_bash], "nothing in the command was executed"
    assert not Path("/tmp/kafka-ops-pwned").exists()


def test_remote_command_runs_the_command_in_real_bash(tmp_path: Path) -> None:
    if shutil.which("bash") is None:
        pytest.skip("bash not installed")
    command = 'printf %s "$BASH_EXECUTION_STRING"; echo " id=$KAFKA_BROKER_ID sub=$(echo \'a;b\')"'
    out = subprocess.run(["/bin/sh", "-c", remote_command(command, 5)], capture_output=True, check=True,
                         text=True, timeout=10).stdout
    assert out == command + " id=5 sub=a;b\n"


def test_remote_command_quotes_a_hostile_broker_id() -> None:
    text = remote_command("true", "1; touch /tmp/kafka-ops-pwned")  # type: ignore[arg-type]
    assert shlex.split(text)[0] == "KAFKA_BROKER_ID=1; touch /tmp/kafka-ops-pwned"
    assert len(shlex.split(text)) == 4


def test_broker_service_operator_rejects_an_unknown_action() -> None:
    with pytest.raises(ValueError, match="action must be one of"):
        BrokerServiceOperator(task_id="x", cluster="c", broker={"id": 1, "host": "h"}, action="restart")


# --- resolve_groups --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "requested, profile, expected",
    [
        (None, ("a", "b"), None),  # null param: no lag gate
        ([], ("a", "b"), ["a", "b"]),  # empty: the profile's list
        ([], (), None),  # nothing watched anywhere: no lag gate
        (["c"], ("a", "b"), ["c"]),  # given: replaces the profile's list
        (["b", "a", "b", "c", "a"], (), ["b", "a", "c"]),  # duplicates dropped, order kept
        ([], ("a", "a", "b"), ["a", "b"]),
    ],
)
def test_resolve_groups(requested, profile, expected) -> None:
    assert resolve_groups(requested, profile) == expected


# --- ProbeSpec -------------------------------------------------------------------------------------


def test_probe_spec_rejects_an_unknown_kind() -> None:
    with pytest.raises(ValueError, match=r"unknown probe kind 'healthy_ish'; expected one of \('gate'"):
        ProbeSpec(kind="healthy_ish", conn_id="c")


@pytest.mark.parametrize("kind", ["gate", "gone", "registered"])
def test_broker_probes_need_a_broker(kind: str) -> None:
    with pytest.raises(ValueError, match=f"probe '{kind}' needs a broker_id"):
        ProbeSpec(kind=kind, conn_id="c")


@pytest.mark.parametrize("kind", ["caught_up", "leadership", "healthy"])
def test_cluster_wide_probes_need_no_broker(kind: str) -> None:
    spec = ProbeSpec(kind=kind, conn_id="c")
    assert spec.broker_id is None and "broker None" not in spec.describe()


@pytest.mark.parametrize("kind", KINDS)
def test_probe_spec_round_trips_through_a_dict(kind: str) -> None:
    spec = ProbeSpec(kind=kind, conn_id="kafka_prod", broker_id=4, consumer_groups=["g1"], request_timeout_s=3.0)
    assert ProbeSpec(**spec.to_dict()) == spec
    assert ("broker 4" in spec.describe()) == (kind != "healthy")  # healthy is cluster-wide


# --- trigger and sensors ---------------------------------------------------------------------------


def test_trigger_serializes_its_arguments_and_needs_one_ok_at_least() -> None:
    probe = ProbeSpec("gate", "c", broker_id=2, consumer_groups=["g"]).to_dict()
    trigger = ClusterProbeTrigger(probe, poll_interval_s=2.5, timeout_s=60, ok_streak=0)
    path, kwargs = trigger.serialize()
    assert path == "triggers.cluster_probe.ClusterProbeTrigger"
    assert kwargs == {"probe": probe, "poll_interval_s": 2.5, "timeout_s": 60, "ok_streak": 1}
    assert ClusterProbeTrigger(**kwargs).serialize() == (path, kwargs)


def test_poking_sensor_needs_ok_streak_passes_in_a_row(monkeypatch: pytest.MonkeyPatch) -> None:
    answers = iter([True, False, True, True, False, True, True, True])
    monkeypatch.setattr(cluster_sensors, "run_probe", lambda spec: ProbeResult(next(answers), "verdict"))
    sensor = cluster_sensors.ClusterHealthySensor(task_id="h", cluster="c", ok_streak="3", deferrable=False)
    assert [sensor.poke({}) for _ in range(8)] == [False, False, False, False, False, False, False, True]


def test_sensor_dry_run_and_template_strings() -> None:
    sensor = cluster_sensors.ClusterHealthySensor(task_id="h", cluster="c", dry_run="True", ok_streak="0")
    assert sensor._is_dry_run() and sensor._streak_needed() == 1
    assert not cluster_sensors.ClusterHealthySensor(task_id="h2", cluster="c", dry_run="False")._is_dry_run()


class StubTI:
    """The task instance fields PreviousBrokerDoneSensor reads, with canned ``get_task_states`` answers."""

    def __init__(self, map_index: int, states: dict[str, str | None]) -> None:
        self.map_index, self.dag_id, self.run_id = map_index, "kafka_rolling_restart", "manual__1"
        self.states = states
        self.calls: list[dict] = []

    def get_task_states(self, **kwargs):
        self.calls.append(kwargs)
        return {self.run_id: self.states}


def turn_sensor() -> PreviousBrokerDoneSensor:
    return PreviousBrokerDoneSensor(task_id="wait_turn", broker={"id": 2, "position": 2, "previous": 0},
                                    last_task_id="restart_broker.soak")


def test_first_broker_never_waits() -> None:
    ti = StubTI(0, {})
    assert turn_sensor().poke({"ti": ti}) is True
    assert ti.calls == []


def test_turn_waits_for_the_previous_broker_last_step() -> None:
    running = StubTI(1, {"restart_broker.gate_0": "success", "restart_broker.stop_0": "running",
                         "restart_broker.soak_0": None})
    assert turn_sensor().poke({"ti": running}) is False
    assert running.calls == [{"dag_id": "kafka_rolling_restart", "map_index": 0, "task_group_id": "restart_broker",
                              "run_ids": ["manual__1"]}]
    done = StubTI(1, {"restart_broker.stop_0": "success", "restart_broker.soak_0": "success"})
    assert turn_sensor().poke({"ti": done}) is True


@pytest.mark.parametrize("state", ["failed", "upstream_failed"])
def test_turn_fails_at_once_when_the_previous_broker_failed(state: str) -> None:
    ti = StubTI(1, {"restart_broker.gate_0": "success", "restart_broker.wait_caught_up_0": state,
                    "restart_broker.soak_0": None})
    with pytest.raises(AirflowFailException, match=r"broker 0 \(previous in the restart order\) did not finish: "
                                                   r"restart_broker.wait_caught_up_0 failed; not touching broker 2"):
        turn_sensor().poke({"ti": ti})


# --- describe_log_dirs normalization -----------------------------------------------------------------


def test_normalize_log_dirs_flattens_and_reports_log_dir_errors() -> None:
    raw = [
        {"broker": 1, "log_dirs": [
            {"log_dir": "/d1", "error_code": 0, "topics": [
                {"name": "t", "partitions": [{"partition_index": 1, "partition_size": 10, "offset_lag": 2,
                                              "is_future_key": False},
                                             {"partition_index": 0, "partition_size": 5}]}]},
            {"log_dir": "/d2", "error_code": 57, "topics": []},
        ]},
        {"broker": 0, "log_dirs": []},
    ]
    assert normalize_log_dirs(raw) == [
        {"broker": 1, "log_dir": "/d1", "topic": "t", "partition": 0, "size_bytes": 5, "offset_lag": 0,
         "is_future": False},
        {"broker": 1, "log_dir": "/d1", "topic": "t", "partition": 1, "size_bytes": 10, "offset_lag": 2,
         "is_future": False},
        {"broker": 1, "log_dir": "/d2", "error_code": 57},
    ]


def test_turn_sensor_reschedules_by_default() -> None:
    # waiting for the previous broker can last long: no worker slot is held between pokes
    assert turn_sensor().mode == "reschedule"
