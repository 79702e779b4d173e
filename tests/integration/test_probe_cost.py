"""What a ClusterProber's polls cost on the shared sandbox: configs are read on the first config-reading look
only (``KafkaAdminHook(cache_configs=True)``), later looks send Metadata and DescribeCluster alone; the looks of the
waits after a stop (gone, registered, caught up) the Metadata alone.

Creates nothing and changes nothing on the sandbox (read-only looks).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from airflow_env import connection_env
from hooks.cluster_profile import get_cluster_profile
from hooks.kafka_admin import KafkaAdminHook
from probes.cluster import ClusterProber

from sandbox.testing import RunningSandbox

pytestmark = [pytest.mark.sandbox, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

CONN = "kafka_sandbox"


def test_second_gate_look_sends_no_describe_configs(sandbox: RunningSandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in connection_env(Path(sandbox.workdir)).items():
        monkeypatch.setenv(name, value)
    sandbox.wait_healthy(timeout_s=60)
    profile = get_cluster_profile(CONN)
    with ClusterProber(profile, request_timeout_s=10) as prober:
        asked: list[list[str]] = []
        read = prober.admin._topic_config_entries

        def spy(topics, skip_unknown=False):
            names = list(topics)
            asked.append(names)
            return read(names, skip_unknown)

        monkeypatch.setattr(prober.admin, "_topic_config_entries", spy)
        prober.look("gate", 1)
        first = dict(prober.admin.requests)
        topics = sorted(t for call in asked for t in call)
        assert topics, "the first look read the topics' configs"
        assert first == {
            "Metadata": 1,
            "DescribeCluster": 1,
            "DescribeConfigs": 1 + math.ceil(len(topics) / 200),
        }

        asked.clear()
        for kind, broker in (("gate", 1), ("healthy", None), ("leadership", 0)):
            prober.look(kind, broker)
        assert asked == [], "no topic DescribeConfigs after the first look"
        sent = {k: v - first.get(k, 0) for k, v in prober.admin.requests.items()}
        assert sent == {"Metadata": 3, "DescribeCluster": 3, "DescribeConfigs": 0}

        # the waits after a stop read the Metadata alone (no DescribeCluster, which waits for a controller while
        # the controller moves); on real Kafka they still see every broker and partition
        before = dict(prober.admin.requests)
        for kind in ("registered", "caught_up"):
            assert prober.look(kind, 1).ok, kind
        assert not prober.look("gone", 1).ok, "broker 1 is up"
        sent = {k: v - before.get(k, 0) for k, v in prober.admin.requests.items() if v - before.get(k, 0)}
        assert sent == {"Metadata": 3}
        bare = prober.state(configs=False)

        cached = prober.state()
    with KafkaAdminHook(profile=profile, request_timeout_s=10) as plain:
        fresh = plain.cluster_state()
    assert dict(cached.topic_min_insync) == dict(fresh.topic_min_insync)
    assert cached.default_min_insync == fresh.default_min_insync
    assert cached.leader_imbalance_percentage == fresh.leader_imbalance_percentage
    assert {p.topic for p in cached.partitions} == {p.topic for p in fresh.partitions}
    assert bare.broker_ids == fresh.broker_ids and bare.controller_id == fresh.controller_id, \
        "ZooKeeper mode: Metadata names the controller DescribeCluster names"
    assert {(p.topic, p.partition) for p in bare.partitions} == {(p.topic, p.partition) for p in fresh.partitions}
