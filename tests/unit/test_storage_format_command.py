"""``runtime.host_files.storage_format_command``: the cluster id reaches Kafka's storage tool as one
``--cluster-id=<id>`` word, so an id that starts with ``-`` (a ZooKeeper-mode cluster's, once in 64) is not read
as an option."""

from __future__ import annotations

import shlex

import pytest
from airflow.sdk.exceptions import AirflowFailException
from kafka_ops.profile import ClusterProfile
from runtime.host_files import storage_format_command

PATHS = {"ssh_conn_id": "ssh", "kafka_home": "/opt/kafka dist",
         "server_properties": "/etc/kafka/server-{broker_id}.properties"}


def profile(extra: dict) -> ClusterProfile:
    return ClusterProfile.from_connection_fields("legacy", "b1:9092", extra)


@pytest.mark.parametrize("cluster_id", ["-ogsUktwTxKZV4yK-4fLig", "MkU3OEVBNTcwNTJENDM2Qk", "--ignore-formatted"])
def test_the_id_is_one_cluster_id_word_whatever_it_starts_with(cluster_id):
    words = shlex.split(storage_format_command(profile(PATHS), 100, cluster_id, "3.9"))
    assert words == ["/opt/kafka dist/bin/kafka-storage.sh", "format", f"--cluster-id={cluster_id}", "-c",
                     "/etc/kafka/server-100.properties", "-r", "3.9", "--ignore-formatted"]


def test_a_broker_needs_no_release_and_shell_text_in_the_id_stays_text():
    words = shlex.split(storage_format_command(profile(PATHS), 3, "x; rm -rf /"))
    assert words[2] == "--cluster-id=x; rm -rf /" and "-r" not in words


def test_without_kafka_home_the_command_is_refused():
    with pytest.raises(AirflowFailException, match="kafka_home and server_properties"):
        storage_format_command(profile({"ssh_conn_id": "ssh"}), 3, "abc")
