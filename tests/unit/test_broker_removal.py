"""The decommission's last step per drained broker (``kafka_ops.broker_removal``): stop, and on KRaft
unregister; never either for a broker that still holds or leads a replica. Pure, no servers."""

from __future__ import annotations

import pytest
from kafka_ops.broker_removal import STOP, UNREGISTER, NotDrained, removal_steps


def test_a_live_drained_broker_is_stopped_and_on_kraft_unregistered() -> None:
    assert removal_steps(3, live=True, held=[], led=[], kraft=True) == [STOP, UNREGISTER]
    assert removal_steps(3, live=True, held=[], led=[], kraft=False) == [STOP]


def test_a_broker_found_stopped_is_unregistered_on_kraft_and_left_alone_in_zookeeper_mode() -> None:
    assert removal_steps(3, live=False, held=[], led=[], kraft=True) == [UNREGISTER]
    assert removal_steps(3, live=False, held=[], led=[], kraft=False) == []


@pytest.mark.parametrize("live", [True, False])
@pytest.mark.parametrize("kraft", [True, False])
def test_a_broker_that_holds_or_leads_a_replica_gets_no_step(live: bool, kraft: bool) -> None:
    with pytest.raises(NotDrained, match=r"broker 3 still holds 2 replicas and leads 0 partitions .*orders-0"):
        removal_steps(3, live=live, held=["orders-0", "orders-1"], led=[], kraft=kraft)
    with pytest.raises(NotDrained, match="leads 1 partitions"):
        removal_steps(3, live=live, held=[], led=["orders-0"], kraft=kraft)
    with pytest.raises(NotDrained, match="not stopped" if live else "down, but not drained"):
        removal_steps(3, live=live, held=["orders-0"], led=[], kraft=kraft)
