"""kafka_ops.elr_min_isr: what turning ELR on (KIP-966) does to min.insync.replicas, and the upgrade's refusal."""

from __future__ import annotations

from kafka_ops.elr_min_isr import MinIsrLayers, enables_elr, refusal, summary


def test_only_a_raise_from_0_turns_elr_on():
    assert enables_elr({"eligible.leader.replicas.version": [0, 1]})
    assert not enables_elr({"eligible.leader.replicas.version": [1, 2]}), "on already: Kafka writes nothing"
    assert not enables_elr({"group.version": [0, 1]})
    assert not enables_elr({})


def test_the_cluster_level_value_is_kept_and_wins_over_the_controllers():
    layers = MinIsrLayers(brokers={0: 2, 1: 2}, cluster_default=2, controller_id=100, controller_static=1)
    assert layers.after() == 2 and layers.changed() == {} and refusal(layers) is None
    assert summary(layers) == ("min.insync.replicas stays 2 when ELR is turned on (the cluster-level value, kept): "
                               "brokers 0, 1 use 2")


def test_without_a_cluster_level_value_the_active_controllers_static_one_is_copied():
    same = MinIsrLayers(brokers={0: 2, 1: 2, 2: 2}, cluster_default=None, controller_id=101, controller_static=2)
    assert same.after() == 2 and refusal(same) is None
    lower = MinIsrLayers(brokers={0: 2, 1: 2, 2: 2}, cluster_default=None, controller_id=101, controller_static=1)
    assert lower.changed() == {0: 2, 1: 2, 2: 2}
    message = refusal(lower)
    assert message is not None
    assert ("Kafka sets the cluster-level min.insync.replicas (none is set) to the active controller 101's static "
            "value, 1, and removes broker-level values; brokers 0, 1, 2 use 2 now") in message
    assert "--entity-default --alter --add-config min.insync.replicas=2" in message
    assert summary(lower).startswith("min.insync.replicas would become 1 when ELR is turned on (the active "
                                     "controller 101's static value, which Kafka writes as the cluster-level one)")


def test_a_raise_is_refused_too_and_only_the_brokers_that_change_are_named():
    layers = MinIsrLayers(brokers={0: 2, 1: 3, 2: 2, 3: 1}, cluster_default=None, controller_id=100,
                          controller_static=2)
    assert layers.changed() == {1: 3, 3: 1}
    message = refusal(layers)
    assert message is not None and "broker 3 uses 1; broker 1 uses 3 now" in message
    assert "--add-config min.insync.replicas=2)" in message, "the value most brokers use, not the strictest one"
    assert "--delete-config" not in message, "no broker has its own value"


def test_brokers_own_values_which_kafka_removes_are_named_in_the_advice():
    # broker 1 has its own 3 (kafka-configs --entity-name 1), the others 2 from their files; a cluster-level 3 would
    # make every topic need 3 in-sync replicas: the advice keeps the others' 2 and says to delete broker 1's own
    layers = MinIsrLayers(brokers={0: 2, 1: 3, 2: 2}, cluster_default=None, controller_id=100, controller_static=2,
                          own={1: 3})
    message = refusal(layers)
    assert message is not None and "broker 1 uses 3 now" in message
    assert ("make the value explicit first: delete the own min.insync.replicas of broker 1 if it should not go "
            "(Kafka removes it; kafka-configs.sh --entity-type brokers --entity-name <id> --alter --delete-config "
            "min.insync.replicas), and set the cluster-level min.insync.replicas to what the brokers should keep") \
        in message
    assert "--add-config min.insync.replicas=2)" in message
    tie = MinIsrLayers(brokers={0: 2, 1: 3}, cluster_default=None, controller_id=100, controller_static=1)
    assert "--add-config min.insync.replicas=3)" in (refusal(tie) or ""), "a tie: the higher value"


def test_an_unknown_outcome_is_refused_with_the_reason():
    layers = MinIsrLayers(brokers={0: 2}, cluster_default=None, controller_id=102, controller_static=None,
                          controller_error="KafkaConnectionError: no answer")
    assert layers.after() is None and layers.changed() == {0: 2}
    message = refusal(layers)
    assert message is not None
    assert ("to the active controller 102's static value, which could not be read (KafkaConnectionError: no answer); "
            "broker 0 uses 2 now") in message
    assert summary(layers).startswith("min.insync.replicas would become unknown")


def test_the_active_controller_is_asked_where_it_listens():
    from kafka_ops.cluster import Broker
    from kafka_ops.profile import ClusterProfile
    from kafka_ops.quorum import Endpoint, Quorum, Voter
    from runtime.elr_layers import controller_address

    brokers = (Broker(0, "b0", 9092), Broker(1, "b1", 9092))
    profile = ClusterProfile.from_connection_fields("k", "b0:9092", {"controller_hosts": {"100": "ctrl-100"}})
    voters = tuple(Voter(c, 5) for c in (1, 100, 101))
    bare = Quorum(100, 3, 5, voters, ())
    assert controller_address(1, brokers, bare, profile) == "b1:9092", "a combined node: its broker listener"
    assert controller_address(100, brokers, bare, profile) == "ctrl-100:9093", "the profile's host, port 9093"
    named = Quorum(100, 3, 5, voters, (), (Endpoint(100, "CONTROLLER", "10.0.0.100", 9094),
                                         Endpoint(101, "CONTROLLER", "ctrl-101.dc", 9095)))
    assert controller_address(100, brokers, named, profile) == "ctrl-100:9094", "the port Kafka names for it"
    assert controller_address(101, brokers, named, profile) == "ctrl-101.dc:9095", "no profile host: Kafka's"
    with_file = ClusterProfile.from_connection_fields("k", "b0:9092", {
        "controller_hosts": {"100": "ctrl-100"}, "controller_properties": {"listeners": "CONTROLLER://0.0.0.0:9097"}})
    assert controller_address(100, brokers, bare, with_file) == "ctrl-100:9097"


def test_layers_are_read_from_describe_configs_answers_with_synonyms():
    static_only = {"value": "2", "STATIC_BROKER_CONFIG": "2", "DEFAULT_CONFIG": "1"}
    answers = {0: static_only,
               1: {"value": "3", "DYNAMIC_BROKER_CONFIG": "3", "DYNAMIC_DEFAULT_BROKER_CONFIG": "2",
                   "STATIC_BROKER_CONFIG": "2", "DEFAULT_CONFIG": "1"},
               2: {"value": "2", "DYNAMIC_DEFAULT_BROKER_CONFIG": "2", "DEFAULT_CONFIG": "1"}}
    layers = MinIsrLayers.from_answers(answers, 100, {"value": "1", "DEFAULT_CONFIG": "1"})
    assert layers == MinIsrLayers(brokers={0: 2, 1: 3, 2: 2}, cluster_default=2, controller_id=100,
                                  controller_static=1, own={1: 3}), "the controller's Kafka default when it sets none"
    assert MinIsrLayers.from_answers({0: static_only}, 101, {"value": "2", "STATIC_BROKER_CONFIG": "2",
                                                             "DEFAULT_CONFIG": "1"}).controller_static == 2
    unread = MinIsrLayers.from_answers({0: static_only}, 101, None, "KafkaConnectionError: no answer")
    assert unread.controller_static is None and unread.controller_error == "KafkaConnectionError: no answer"
    assert unread.cluster_default is None and unread.own == {}
    odd = MinIsrLayers.from_answers({0: static_only}, 101, {"value": "2"})
    assert odd.controller_static is None and "names no static or default min.insync.replicas" in odd.controller_error
