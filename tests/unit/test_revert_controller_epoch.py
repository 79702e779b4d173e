"""``runtime.migration_steps.raise_controller_epoch`` (a revert, KAFKA-20488) against a fake ZooKeeper that
checks versions as kazoo does."""

from __future__ import annotations

import json
import logging

import pytest
from kazoo.exceptions import BadVersionError
from runtime.migration_steps import raise_controller_epoch


class FakeZk:
    """``exists``/``get``/``set`` as kazoo answers them: a znode's data and version, ``set`` version-checked."""

    def __init__(self, nodes: dict[str, bytes]) -> None:
        self.nodes = {path: [data, 0] for path, data in nodes.items()}

    def exists(self, path: str) -> bool:
        return path in self.nodes

    def get(self, path: str):
        data, version = self.nodes[path]
        return data, type("Stat", (), {"version": version})()

    def set(self, path: str, data: bytes, version: int = -1) -> None:
        if version not in (-1, self.nodes[path][1]):
            raise BadVersionError()
        self.nodes[path] = [data, self.nodes[path][1] + 1]


def kraft_controller(epoch: int) -> bytes:
    return json.dumps({"version": 2, "brokerid": 101, "timestamp": "1", "kraftControllerEpoch": epoch}).encode()


def test_the_epoch_is_raised_to_the_kraft_controllers_before_controller_is_deleted(caplog):
    zk = FakeZk({"/controller_epoch": b"4", "/controller": kraft_controller(7)})
    with caplog.at_level(logging.INFO):
        assert raise_controller_epoch(zk, logging.getLogger("test")) == 7
    assert zk.nodes["/controller_epoch"] == [b"7", 1]
    assert "raised from 4 to 7" in caplog.text and "(epoch 8)" in caplog.text


def test_an_epoch_already_past_the_kraft_controllers_is_kept():
    zk = FakeZk({"/controller_epoch": b"9", "/controller": kraft_controller(7)})
    assert raise_controller_epoch(zk, logging.getLogger("test")) is None
    assert zk.nodes["/controller_epoch"] == [b"9", 0]


def test_a_controller_elected_meanwhile_is_not_overwritten():
    zk = FakeZk({"/controller_epoch": b"4", "/controller": kraft_controller(7)})
    real_get = zk.get

    def racing_get(path):  # a broker takes the controller (epoch 5) between the read and the write
        answer = real_get(path)
        if path == "/controller_epoch":
            zk.nodes[path] = [b"5", zk.nodes[path][1] + 1]
        return answer

    zk.get = racing_get
    with pytest.raises(BadVersionError):
        raise_controller_epoch(zk, logging.getLogger("test"))
    assert zk.nodes["/controller_epoch"][0] == b"5"
