"""A gate waits for every broker the stop relies on to answer (``kafka_ops.health.brokers_answer``): a hung broker
(a GC pause, a stalled disk, a frozen VM) stays registered and in every ISR until its session expires, so the
metadata alone calls the cluster healthy. The broker gate (``BrokerRollOperator._gate``) asks once the rest passes;
the fake prober's admin says which brokers do not answer. On real Kafka: a SIGSTOPped broker, named by
``KafkaAdminHook.unanswered_brokers`` (tests/integration/test_kafka_hooks.py) and holding a roll
(tests/dags/test_kafka_rolling_restart.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from airflow.sdk.exceptions import AirflowFailException
from kafka_ops import health
from kafka_ops.cluster import Broker, ClusterState, Partition
from operators.broker_roll import BrokerRollOperator

BROKERS = tuple(Broker(b, f"b{b}", 9092, f"rack-{b}") for b in (0, 1, 2))
HEALTHY = ClusterState(BROKERS, tuple(Partition("t", i, i, (i, (i + 1) % 3, (i + 2) % 3), (0, 1, 2))
                                      for i in range(3)), controller_id=1)


class Admin:
    def __init__(self) -> None:
        self.hung: list[dict[int, str]] = []  # one answer per ask, the last one repeated
        self.asked: list[list[int]] = []

    def unanswered_brokers(self, brokers) -> dict[int, str]:
        assert all(address == f"b{b}:9092" for b, address in brokers.items()), brokers
        ids = list(brokers)
        self.asked.append(ids)
        answer = self.hung.pop(0) if len(self.hung) > 1 else self.hung[0]
        return {b: why for b, why in answer.items() if b in ids}


class Prober:
    def __init__(self, state: ClusterState) -> None:
        self.admin = Admin()
        self.states = [state]

    def state(self, configs: bool = True) -> ClusterState:
        return self.states.pop(0) if len(self.states) > 1 else self.states[0]


@pytest.fixture
def op() -> BrokerRollOperator:
    op = BrokerRollOperator(task_id="broker", roll_id="restart",
                            settings={"cluster": "c", "healthcheck_interval_s": 1, "healthcheck_timeout_s": 0.3},
                            batch={"batch": 1, "batches": 1, "label": "broker 0", "brokers": [0]})
    op.resolve({"params": {}})
    op.prober = Prober(HEALTHY)
    op.lag = None
    op._context = {}
    op._sleep = lambda seconds: None
    return op


RECORD = SimpleNamespace(consumer_groups=None)


def test_a_broker_that_does_not_answer_holds_the_gate_of_another_and_is_named(op):
    op.prober.admin.hung = [{2: "no answer within 5.0 s"}]
    with pytest.raises(AirflowFailException) as err:
        op._gate(RECORD, 0, {0: {"id": 0}}, [0], [])
    text = str(err.value)
    assert "waiting until broker 0 may be stopped: gate broker 0: answers (1): broker 2 does not answer (no answer " \
           "within 5.0 s): it is still in the metadata, so it looks in-sync" in text, text
    assert op.prober.admin.asked and all(ids == [1, 2] for ids in op.prober.admin.asked), \
        "the brokers the stop relies on are asked, not the one to stop"


def test_the_gate_passes_once_every_broker_answers(op):
    op.prober.admin.hung = [{2: "no answer within 5.0 s"}, {}]
    op._gate(RECORD, 0, {0: {"id": 0}}, [0], [])
    assert len(op.prober.admin.asked) == 2


def test_brokers_are_not_asked_while_the_metadata_already_holds_the_gate(op):
    urp = ClusterState(BROKERS, (Partition("t", 0, 0, (0, 1, 2), (0, 1)),), controller_id=1)
    op.prober.states = [urp]
    op.prober.admin.hung = [{}]
    with pytest.raises(AirflowFailException, match="urp"):
        op._gate(RECORD, 0, {0: {"id": 0}}, [0], [])
    assert op.prober.admin.asked == [], "no request to every broker at each look of a gate the metadata holds"


def test_the_rule_names_each_broker_with_its_reason_in_id_order():
    verdict = health.brokers_answer({5: "KafkaConnectionError: refused", 2: "no answer within 5.0 s"})
    assert not verdict.ok and verdict.rule == "answers"
    assert [r.split(" (")[0] for r in verdict.reasons] == ["broker 2 does not answer", "broker 5 does not answer"]
    assert "(KafkaConnectionError: refused)" in verdict.reasons[1]
    assert health.brokers_answer({}).ok
