"""The decommission's ``stop_brokers`` step (``operators.broker_service``) on a fake KRaft cluster: stop, wait until
gone, unregister; a broker found stopped only unregistered; a refused UnregisterBroker fails at once, named with
the way out. The real-Kafka path is tests/dags/test_kraft_operations.py."""

from __future__ import annotations

from typing import Any

import pytest
from airflow.sdk.exceptions import AirflowFailException
from kafka.errors import ClusterAuthorizationFailedError, RequestTimedOutError
from kafka_ops.cluster import Broker, ClusterState, Partition
from kafka_ops.profile import ClusterProfile
from kafka_ops.roll_spec import ClusterMode
from operators import broker_service
from probes.cluster import Verdict
from runtime import profiles

PROFILE = ClusterProfile.from_connection_fields("kafka_kraft", "b1:9092", {"ssh_conn_id": "ssh"})
SETTINGS = {"cluster": "kafka_kraft", "brokers": [3], "enabled": True, "dry_run": False,
            "healthcheck_interval_s": 0.01, "healthcheck_timeout_s": 1, "command_timeout_s": 5}


class FakeCluster:
    """Brokers 0-3 live; partition t-0 on 0, 1, 2. ``stop`` takes a broker out of the metadata; ``unregister``
    answers from ``registered`` or raises each of ``errors`` first."""

    def __init__(self) -> None:
        self.live = {0, 1, 2, 3}
        self.registered = {0, 1, 2, 3}
        self.errors: list[Exception] = []
        self.sent: list[tuple[str, int]] = []

    def state(self, configs: bool = True) -> ClusterState:
        return ClusterState(tuple(Broker(b, f"h{b}", 9092) for b in sorted(self.live)),
                            (Partition("t", 0, 0, (0, 1, 2), (0, 1, 2)),), controller_id=0)

    def unregister_broker(self, broker_id: int) -> bool:
        self.sent.append(("unregister", broker_id))
        if self.errors:
            raise self.errors.pop(0)
        found = broker_id in self.registered
        self.registered.discard(broker_id)
        return found


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> FakeCluster:
    fake = FakeCluster()

    class Prober:
        def __init__(self, profile: Any) -> None:
            self.admin = fake

        def __enter__(self) -> Prober:
            return self

        def __exit__(self, *exc: object) -> None:
            pass

        def state(self, configs: bool = True) -> ClusterState:
            return fake.state()

        def look(self, kind: str, broker: int) -> Verdict:
            assert kind == "gone"
            return Verdict(broker not in fake.live, f"broker {broker} {'gone' if broker not in fake.live else 'up'}")

    class Command:
        def __init__(self, broker: dict) -> None:
            self.broker = broker

        def run(self, ssh_conn_id: str, timeout_s: float, log: Any, dry_run: bool = False) -> None:
            fake.sent.append(("stop" if not dry_run else "dry stop", self.broker["id"]))
            if not dry_run:
                fake.live.discard(self.broker["id"])

    monkeypatch.setattr(broker_service, "ClusterProber", Prober)
    monkeypatch.setattr(broker_service.BrokerCommand, "choose",
                        classmethod(lambda cls, profile, step, choice, broker: Command(broker)))
    monkeypatch.setattr(broker_service, "ensure_held", lambda *args: None)
    monkeypatch.setattr(broker_service.BrokerServiceOperator, "mode", lambda self, context, admin: ClusterMode.KRAFT)
    monkeypatch.setattr(profiles, "profile_or_fail", lambda conn_id: PROFILE)
    return fake


LAST_OP: list[broker_service.BrokerServiceOperator] = []


def stop(**settings: Any) -> dict[str, Any]:
    op = broker_service.BrokerServiceOperator(task_id="stop_brokers", action="stop", operation="decommission",
                                              settings={**SETTINGS, **settings})
    LAST_OP[:] = [op]
    return op.execute({"params": {}})


def test_a_drained_kraft_broker_is_stopped_then_unregistered(cluster, capfd):
    done = stop()
    assert (done["acted"], done["unregistered"]) == ([3], [3])
    assert cluster.sent == [("stop", 3), ("unregister", 3)] and cluster.registered == {0, 1, 2}
    assert "broker 3 unregistered (UnregisterBroker, KIP-631)" in capfd.readouterr().out
    assert LAST_OP[0].note_line(done, dry_run=False) == "brokers stopped: [3]; unregistered (KRaft): [3]"


def test_a_resume_unregisters_a_broker_found_stopped_and_reports_no_stop(cluster, capfd):
    cluster.live.discard(3)
    done = stop()
    assert (done["acted"], done["unregistered"]) == ([], [3]), "a run reports only the stops it made"
    assert LAST_OP[0].note_line(done, dry_run=False) == \
        "brokers stopped: none; unregistered (KRaft): [3]; stopped already: [3]"
    assert cluster.sent == [("unregister", 3)]
    again = stop()
    assert (again["acted"], again["unregistered"]) == ([], [])
    assert "has no registration (unregistered already)" in capfd.readouterr().out


def test_a_dry_run_sends_nothing_that_changes_the_cluster(cluster, capfd):
    done = stop(dry_run=True)
    assert (done["acted"], done["unregistered"]) == ([3], [3])
    assert cluster.sent == [("dry stop", 3)] and cluster.registered == {0, 1, 2, 3}
    assert "DRY RUN: would unregister broker 3" in capfd.readouterr().out
    assert LAST_OP[0].note_line(done, dry_run=True) == \
        "brokers (dry run: nothing ran): would stop [3], would unregister [3]"


def test_a_step_not_asked_to_stop_touches_nothing_and_says_so(cluster):
    done = stop(enabled=False)
    assert (done["acted"], done["asked"], cluster.sent) == ([], False, [])
    assert LAST_OP[0].note_line(done, dry_run=False) == \
        "brokers [3] drained, not stopped (stop_brokers is false): left as they are"


def test_a_transient_error_is_waited_out_and_a_refusal_fails_at_once_with_the_way_out(cluster):
    cluster.errors = [RequestTimedOutError("slow controller")]
    assert stop()["acted"] == [3] and cluster.registered == {0, 1, 2}
    cluster.live.add(4)
    cluster.registered.add(4)
    cluster.errors = [ClusterAuthorizationFailedError("no ALTER on the cluster")]
    with pytest.raises(AirflowFailException) as failed:
        stop(brokers=[4])
    assert "UnregisterBroker 4 refused: ClusterAuthorizationFailedError" in str(failed.value)
    assert "kafka-cluster.sh unregister --id 4" in str(failed.value)
    assert cluster.sent[-2:] == [("stop", 4), ("unregister", 4)], "asked once: waiting cannot fix a refusal"


def test_a_failure_after_a_stop_says_which_brokers_this_run_stopped_first(cluster):
    with pytest.raises(AirflowFailException) as failed:
        stop(brokers=[3, 2])
    assert str(failed.value).startswith("this run stopped brokers [3], then: broker 2 still holds 1 replicas"), \
        str(failed.value)
    assert cluster.sent == [("stop", 3), ("unregister", 3)]


def test_a_broker_that_still_holds_a_replica_is_neither_stopped_nor_unregistered(cluster):
    with pytest.raises(AirflowFailException, match="broker 2 still holds 1 replicas and leads 0 partitions"):
        stop(brokers=[2])
    cluster.live.discard(2)  # down, still listed as a replica
    with pytest.raises(AirflowFailException, match="down, but not drained: nothing done"):
        stop(brokers=[2])
    assert cluster.sent == []


def format_op(extra: dict[str, Any], dry_run: bool) -> broker_service.BrokerServiceOperator:
    op = broker_service.BrokerServiceOperator(task_id="start_new_brokers", action="start",
                                              settings={**SETTINGS, "dry_run": dry_run}, operation="scale-out")
    op.resolve({"params": {}})
    op._profile = ClusterProfile.from_connection_fields("kafka_kraft", "b1:9092", {"ssh_conn_id": "ssh", **extra})
    return op


def test_a_new_kraft_brokers_storage_is_formatted_for_the_cluster_before_its_start(monkeypatch, capsys):
    ran: list[tuple[dict, str]] = []
    monkeypatch.setattr(broker_service, "ensure_held", lambda *a: None)
    monkeypatch.setattr(broker_service, "run_on_host", lambda profile, node, command, what, timeout_s: (
        ran.append((node, command)) or "Formatting metadata directory /data with metadata.version 4.0-IV3.\n"))
    paths = {"kafka_home": "/opt/kafka", "server_properties": "/etc/kafka/server-{broker_id}.properties"}
    format_op(paths, dry_run=True)._format_storage({}, 3, "h3", "abc-ID", dry_run=True)
    said = capsys.readouterr().out
    assert ran == [] and "DRY RUN: broker 3 (h3): would format its storage for cluster abc-ID" in said, said
    format_op(paths, dry_run=False)._format_storage({}, 3, "h3", "abc-ID", dry_run=False)
    assert ran == [({"id": 3, "host": "h3"}, "/opt/kafka/bin/kafka-storage.sh format --cluster-id=abc-ID -c "
                                             "/etc/kafka/server-3.properties --ignore-formatted")]
    assert "broker 3 (h3): storage for cluster abc-ID: Formatting metadata directory /data" in capsys.readouterr().out


def test_without_kafka_home_or_server_properties_the_broker_starts_unformatted_and_the_log_says_so(
        monkeypatch, capsys):
    monkeypatch.setattr(broker_service, "run_on_host", lambda *a, **k: pytest.fail("nothing may run"))
    for extra in ({}, {"kafka_home": "/opt/kafka"}, {"server_properties": "/etc/kafka/server.properties"}):
        format_op(extra, dry_run=False)._format_storage({}, 3, "h3", "abc-ID", dry_run=False)
        said = capsys.readouterr().out
        assert ("broker 3: connection 'kafka_kraft' names no kafka_home and server_properties, so its storage is not "
                "formatted by the run: a KRaft broker starts only on log dirs formatted for the cluster "
                "(kafka-storage.sh format --cluster-id=abc-ID -c <server.properties>)") in said, said
