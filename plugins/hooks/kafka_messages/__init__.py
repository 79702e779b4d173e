"""Kafka protocol messages kafka-python does not ship, built by kafka-python from Kafka's own message schemas.

kafka-python encodes and decodes every request from the JSON schema Kafka publishes for it
(``clients/src/main/resources/common/message/*.json`` in apache/kafka); this package holds the schemas of the
requests the hooks need and kafka-python lacks, copied unchanged (Apache License 2.0, their headers kept), and
the classes kafka-python builds from them (``load_json=`` names this package as where to find the schema). No
encoding is written here.

- ``UnregisterBrokerRequest`` / ``UnregisterBrokerResponse`` (API key 64, v0; KIP-631): remove a broker's
  registration from a KRaft cluster's metadata (``kafka-cluster.sh unregister --id N``). Brokers forward it to
  the active controller. Errors: ``BROKER_ID_NOT_REGISTERED`` (102) when the id has no registration.
"""

from __future__ import annotations

import sys

from kafka.protocol.api_message import ApiMessage

_HERE = sys.modules[__name__]


class UnregisterBrokerRequest(ApiMessage, load_json=_HERE):
    """UnregisterBroker v0 (KIP-631): field ``broker_id`` (int32)."""


class UnregisterBrokerResponse(ApiMessage, load_json=_HERE):
    """UnregisterBroker v0 answer: ``throttle_time_ms``, ``error_code``, ``error_message``."""


__all__ = ["UnregisterBrokerRequest", "UnregisterBrokerResponse"]
