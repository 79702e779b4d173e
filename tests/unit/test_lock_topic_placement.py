"""Where the lock topic's replicas go (``hooks.kafka_lock.rack_spread``): one per rack before any rack gets a
second, only live brokers given. Pure, no servers."""

from __future__ import annotations

import random

import pytest
from hooks.kafka_lock import rack_spread

SIX = {0: "rack-0", 1: "rack-1", 2: "rack-2", 3: "rack-0", 4: "rack-1", 5: "rack-2"}


@pytest.mark.parametrize("seed", range(20))
def test_three_replicas_over_three_racks_take_one_broker_of_each(seed: int) -> None:
    chosen = rack_spread(SIX, 3, random.Random(seed))
    assert len(set(chosen)) == 3 and sorted(SIX[b] for b in chosen) == ["rack-0", "rack-1", "rack-2"]


def test_fewer_racks_than_replicas_share_only_what_they_must_and_spread_over_brokers() -> None:
    two_racks = {0: "a", 1: "b", 2: "a", 3: "b", 4: "a"}
    for seed in range(20):
        chosen = rack_spread(two_racks, 3, random.Random(seed))
        assert len(set(chosen)) == 3 and {two_racks[b] for b in chosen} == {"a", "b"}
    seen = {b for seed in range(50) for b in rack_spread(SIX, 3, random.Random(seed))}
    assert seen == set(SIX), "not always the same brokers"


def test_without_racks_any_distinct_brokers_and_too_few_brokers_refused() -> None:
    assert sorted(rack_spread({0: None, 1: None, 2: None}, 3)) == [0, 1, 2]
    assert len(set(rack_spread({0: None, 1: None, 2: None, 3: None}, 2))) == 2
    with pytest.raises(ValueError, match="3 replicas need 3 brokers, 2 given"):
        rack_spread({0: "a", 1: "b"}, 3)
