"""A gate waits for every broker the stop relies on to answer (``kafka_ops.health.brokers_answer``): a hung broker
(a GC pause, a stalled disk, a frozen VM) stays registered and in every ISR until its session expires, so the
metadata alone calls the cluster healthy. The broker gate (``BrokerRollOperator._gate``) asks once the rest passes;
the fake prober's admin says which brokers do not answer. So does what a stopped broker registers with when it
starts again (``kafka_ops.health.start_needs_answer``: ZooKeeper, the KRaft quorum leader): while it does not
answer, nothing can change the metadata either, and a broker stopped then stays down. On real Kafka: a SIGSTOPped
broker, named by ``KafkaAdminHook.unanswered_brokers`` (tests/integration/test_kafka_hooks.py) and holding a roll,
and a frozen ZooKeeper holding one (tests/dags/test_kafka_rolling_restart.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from airflow.sdk.exceptions import AirflowFailException
from kafka_ops import health
from kafka_ops.cluster import Broker, ClusterState, Partition
from operators.broker_roll import BrokerRollOperator
from runtime.start_dependencies import Dependency
from runtime.waiting import Check

BROKERS = tuple(Broker(b, f"b{b}", 9092, f"rack-{b}") for b in (0, 1, 2))
HEALTHY = ClusterState(BROKERS, tuple(Partition("t", i, i, (i, (i + 1) % 3, (i + 2) % 3), (0, 1, 2))
                                      for i in range(3)), controller_id=1)


class Admin:
    def __init__(self) -> None:
        self.hung: list[dict[int, str]] = []  # one answer per ask, the last one repeated
        self.asked: list[list[int]] = []
        self.reassigning: list[dict] | Exception = []  # ListPartitionReassignments' answer

    def list_partition_reassignments(self) -> list[dict]:
        if isinstance(self.reassigning, Exception):
            raise self.reassigning
        return self.reassigning

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
        self.reads = 0

    def state(self, configs: bool = True) -> ClusterState:
        self.reads += 1
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
    op.registry = []  # ZooKeeper's answers, one per ask, the last one repeated; [] = nothing to ask (no dependency)
    op.found = op.zk_asked = 0

    def zookeeper() -> Check:
        op.zk_asked += 1
        answer = op.registry.pop(0) if len(op.registry) > 1 else op.registry[0]
        return Check(answer is None, answer or "ZooKeeper answers (3 brokers registered)")

    def dependencies(nodes) -> list[Dependency]:
        op.found += 1
        return [Dependency("ZooKeeper zk:2181/kafka", "ZooKeeper", zookeeper)] if op.registry else []

    op._dependencies = dependencies
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


def test_a_gate_held_by_a_reassignment_started_during_the_roll_says_so_when_it_gives_up(op):
    """The plan refuses a reassignment in progress; one started later holds the gate on its new replicas (URPs to the
    metadata): the gate's failure names it, asked once when the gate gives up (not at every look)."""
    from kafka_ops.profile import ClusterProfile

    op._profile = ClusterProfile.from_connection_fields("c", "b0:9092")
    adding = ClusterState(BROKERS, (Partition("t", 0, 0, (0, 1, 2, 3), (0, 1, 2)),), controller_id=1)
    op.prober.states = [adding]
    op.prober.admin.reassigning = [{"topic": "t", "partition": 0, "replicas": [0, 1, 2, 3], "adding_replicas": [3],
                                    "removing_replicas": [2]}]
    with pytest.raises(AirflowFailException) as err:
        op._gate(RECORD, 0, {0: {"id": 0}}, [0], [])
    text = str(err.value)
    assert "t-0: under-replicated, isr [0, 1, 2] of replicas [0, 1, 2, 3] (missing [3])" in text, text
    assert text.endswith("; a partition reassignment started during the roll is in progress (1 partition: t-0: adding "
                         "[3], removing [2]): its new replicas stay out of sync until it ends; let it finish or cancel "
                         "it (kafka-reassign-partitions.sh --cancel), then clear this task"), text
    # a gate held by something else (a broker that does not answer): not asked, even with one in progress
    op.prober.states = [HEALTHY]
    op.prober.admin.hung = [{2: "no answer within 5.0 s"}]
    with pytest.raises(AirflowFailException) as err:
        op._gate(RECORD, 0, {0: {"id": 0}}, [0], [])
    assert "broker 2 does not answer" in str(err.value) and "reassignment" not in str(err.value)
    op.prober.states = [adding]
    # none in progress, or the question fails: the gate's own reason, unchanged
    for answer in ([], RuntimeError("no controller")):
        op.prober.admin.reassigning = answer
        with pytest.raises(AirflowFailException) as err:
            op._gate(RECORD, 0, {0: {"id": 0}}, [0], [])
        assert "(missing [3])" in str(err.value) and "reassignment" not in str(err.value)


def test_the_rule_names_each_broker_with_its_reason_in_id_order():
    verdict = health.brokers_answer({5: "KafkaConnectionError: refused", 2: "no answer within 5.0 s"})
    assert not verdict.ok and verdict.rule == "answers"
    assert [r.split(" (")[0] for r in verdict.reasons] == ["broker 2 does not answer", "broker 5 does not answer"]
    assert "(KafkaConnectionError: refused)" in verdict.reasons[1]
    assert health.brokers_answer({}).ok


ZK_DOWN = "ZooKeeper zk:2181/kafka does not answer: KazooTimeoutError: Connection time-out"


def test_zookeeper_that_does_not_answer_holds_the_gate_and_is_named(op):
    """A frozen or lost ZooKeeper: the metadata cannot change (it still calls the cluster healthy) and every broker
    answers, but a broker stopped now could not register again (Kafka exits after zookeeper.connection.timeout.ms)."""
    op.prober.admin.hung = [{}]
    op.registry = [ZK_DOWN]
    with pytest.raises(AirflowFailException) as err:
        op._gate(RECORD, 0, {0: {"id": 0}}, [0], [])
    text = str(err.value)
    assert f"waiting until broker 0 may be stopped: gate broker 0: registers-with (1): {ZK_DOWN}: a node stopped " \
           "now could not register when started again, and nothing could move its leaders meanwhile" in text, text
    assert op.found == 1, "what the brokers register with is found once per task, asked at every look"


def test_the_gate_passes_once_zookeeper_answers_again(op):
    """The first look asks ZooKeeper before reading the cluster (in ZooKeeper mode that read waits on it), later looks
    once the rest passes; a look that passes asks it once."""
    op.prober.admin.hung = [{}]
    op.registry = [ZK_DOWN, ZK_DOWN, None]
    op._gate(RECORD, 0, {0: {"id": 0}}, [0], [])
    assert op.registry == [None] and op.zk_asked == 3
    assert len(op.prober.admin.asked) == 2, "the first look, held by ZooKeeper, asked no broker"
    assert op.prober.reads == 2, "the first look, held by ZooKeeper, did not read the cluster (it would wait on it)"


def test_a_first_look_that_passes_asks_zookeeper_before_and_after_reading_the_cluster(op):
    """Asked before the read (which waits on ZooKeeper) and once the rest passed (the state the stop relies on), a few
    milliseconds each; what it registers with is found once."""
    op.prober.admin.hung = [{}]
    op.registry = [None]
    op._gate(RECORD, 0, {0: {"id": 0}}, [0], [])
    assert op.zk_asked == 2 and op.found == 1 and len(op.prober.admin.asked) == 1


def test_the_brokers_and_zookeeper_are_asked_side_by_side_once_the_rest_passes(op):
    """Both wait on the network (0.2-0.5 s each on a loaded sandbox): the brokers' requests are sent while ZooKeeper is
    asked, so the look takes the longer of the two, not their sum. The fake brokers answer only once ZooKeeper was
    asked the second time (the first, before the read, is alone)."""
    import threading

    zk_second = threading.Event()
    ask_brokers = op.prober.admin.unanswered_brokers

    def brokers_after_zookeeper(brokers):
        assert zk_second.wait(5), "ZooKeeper was not asked while the brokers' answers were awaited"
        return ask_brokers(brokers)

    op.prober.admin.unanswered_brokers = brokers_after_zookeeper
    op.prober.admin.hung = [{}]
    op.registry = [None]
    zookeeper = op._dependencies({0: {"id": 0}})[0].answers
    asked = []

    def counting() -> Check:
        asked.append(threading.current_thread().name)
        if len(asked) == 2:
            zk_second.set()
        return zookeeper()

    op._dependencies = lambda nodes: [Dependency("ZooKeeper zk:2181/kafka", "ZooKeeper", counting)]
    op._gate(RECORD, 0, {0: {"id": 0}}, [0], [])
    assert len(asked) == 2 and asked[1].startswith("gate-registers-with"), asked


def test_zookeeper_is_asked_at_the_first_look_only_while_the_metadata_holds_the_gate(op):
    op.prober.states = [ClusterState(BROKERS, (Partition("t", 0, 0, (0, 1, 2), (0, 1)),), controller_id=1)]
    op.prober.admin.hung = [{}]
    op.registry = [None]
    with pytest.raises(AirflowFailException, match="urp") as err:
        op._gate(RECORD, 0, {0: {"id": 0}}, [0], [])
    assert "registers-with" not in str(err.value) and op.found == 1 and op.zk_asked == 1


def test_a_cluster_read_that_fails_while_zookeeper_does_not_answer_names_zookeeper(op):
    """A ZooKeeper-mode broker reads topic configs from ZooKeeper: an outage that begins after the first look fails
    the read (DescribeConfigs times out); the gate says why rather than "could not check"."""
    from confluent_kafka import KafkaError, KafkaException

    calls = []

    def state(configs: bool = True) -> ClusterState:
        calls.append(configs)
        raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "Failed while waiting for response from broker"))

    op.prober.state = state
    op.prober.admin.hung = [{}]
    op.registry = [None, ZK_DOWN]
    with pytest.raises(AirflowFailException) as err:
        op._gate(RECORD, 0, {0: {"id": 0}}, [0], [])
    text = str(err.value)
    assert f"gate broker 0: registers-with: {ZK_DOWN}: a node stopped now could not register when started" in text, text
    assert "(the cluster could not be read: " in text and calls, text


def test_the_start_needs_rule_names_each_service():
    verdict = health.start_needs_answer([ZK_DOWN, "no KRaft quorum leader answers: KafkaTimeoutError"])
    assert not verdict.ok and verdict.rule == "registers-with" and len(verdict.reasons) == 2
    assert verdict.reasons[1].startswith("no KRaft quorum leader answers: KafkaTimeoutError: a node stopped now")
    assert health.start_needs_answer([]).ok


def test_the_first_look_names_zookeeper_without_reading_the_cluster(op, capfd):
    """On real Kafka in ZooKeeper mode the cluster's read (the topic configs) waits on ZooKeeper and fails after the
    request timeout (15 s) while it does not answer: the first look asks ZooKeeper first and names it at once."""
    from confluent_kafka import KafkaError, KafkaException

    healthy = op.prober.state

    def state(configs: bool = True) -> ClusterState:
        if op.registry[0] is not None:  # as ZooKeeper last answered
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "Failed while waiting for response from broker"))
        return healthy(configs)

    op.prober.state = state
    op.prober.admin.hung = [{}]
    op.registry = [ZK_DOWN, ZK_DOWN, None]
    op._gate(RECORD, 0, {0: {"id": 0}}, [0], [])
    first = next(line for line in capfd.readouterr().out.splitlines() if "may not be stopped yet" in line)
    assert f"gate broker 0: registers-with (1): {ZK_DOWN}: a node stopped now" in first, first
    assert "could not be read" not in first, first
