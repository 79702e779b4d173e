"""``kafka_ops.unstarted_broker``: a new broker that has not started, as its host's server.properties describes it
(what a scale-out dry run plans onto), and the refusals of a file that describes another broker."""

from __future__ import annotations

import pytest
from kafka_ops.cluster import Broker
from kafka_ops.unstarted_broker import rack_problem, unstarted_broker

KRAFT = """# written by hand
process.roles=broker
node.id=7
broker.rack=rack-b
listeners=PLAINTEXT://10.0.0.7:9092,CLIENT://10.0.0.7:9094
advertised.listeners=CLIENT://kafka-7.example:9094,PLAINTEXT://10.0.0.7:9092
controller.quorum.bootstrap.servers=10.0.0.100:9093
"""

ZOOKEEPER = """broker.id=3
zookeeper.connect=zk:2181
listeners=PLAINTEXT\\://0.0.0.0\\:9192
"""


def test_a_kraft_brokers_file_gives_its_rack() -> None:
    assert unstarted_broker(7, "h7", KRAFT) == Broker(7, "h7", 0, "rack-b"), "port unknown before it registers"


def test_a_zookeeper_brokers_file_without_rack() -> None:
    # no broker.rack = no rack (empty counts as unset)
    assert unstarted_broker(3, "h3", ZOOKEEPER) == Broker(3, "h3", 0, None)
    assert unstarted_broker(3, "h3", ZOOKEEPER + "broker.rack=  \n").rack is None


@pytest.mark.parametrize(("text", "words"), [
    ("zookeeper.connect=zk:2181\n", "sets neither node.id nor broker.id"),
    ("broker.id=4\n", "has broker.id=4: that host starts broker 4, not 3"),
    ("node.id=3\nbroker.id=5\n", "has broker.id=5"),
    ("broker.id=three\n", "broker.id=three, not a number"),
    ("process.roles=controller\nnode.id=3\n", "process.roles=controller: a controller"),
])
def test_a_file_that_does_not_describe_broker_3_is_refused(text: str, words: str) -> None:
    with pytest.raises(ValueError, match="broker 3: its server.properties on h3") as info:
        unstarted_broker(3, "h3", text)
    assert words in str(info.value)


def test_a_combined_node_is_a_broker() -> None:
    assert unstarted_broker(3, "h3", "process.roles=broker,controller\nnode.id=3\nbroker.rack=a\n").rack == "a"


RACKED = [Broker(0, "h0", 9092, "a"), Broker(1, "h1", 9092, "b")]
RACKLESS = [Broker(0, "h0", 9092), Broker(1, "h1", 9092)]


def test_a_new_broker_without_rack_among_brokers_with_racks_is_refused_and_the_other_way_round() -> None:
    assert rack_problem(Broker(3, "h3", 9092, None), RACKED) == (
        "broker 3: its server.properties on h3 sets no broker.rack, while the brokers have racks ['a', 'b']: set its "
        "broker.rack (the plan is rack-aware and needs a rack on every broker)")
    assert "sets broker.rack=c, while brokers [0, 1] have none" in rack_problem(Broker(3, "h3", 9092, "c"), RACKLESS)


def test_a_new_broker_whose_rack_fits_is_not_refused() -> None:
    assert rack_problem(Broker(3, "h3", 9092, "c"), RACKED) is None, "a new rack is a rack"
    assert rack_problem(Broker(3, "h3", 9092, None), RACKLESS) is None
