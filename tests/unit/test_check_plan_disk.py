"""CheckPlanOperator's disk preflight: started brokers judged by their DescribeLogDirs answer, a dry run's
not-started broker by its host's df (both faked here; the sandbox DAG test measures a real host)."""

from __future__ import annotations

import logging

import operators.reassignment_plan as reassignment_plan
import pytest
from airflow.sdk.exceptions import AirflowFailException
from kafka_ops.plan_files import Move


class FakeAdmin:
    """DescribeLogDirs as kafka_admin.log_dir_space answers it; records which brokers were asked."""

    asked: list[list[int]] = []

    def __init__(self, profile=None):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def log_dir_space(self, brokers):
        FakeAdmin.asked.append(list(brokers))
        return {b: {"/data": 10_000_000_000} for b in brokers}


def operator(dry_run: bool):
    op = reassignment_plan.CheckPlanOperator(task_id="check_plan", settings={"cluster": "c"})
    op.dry_run, op.interval_s, op.timeout_s = dry_run, 0.1, 1.0
    return op


@pytest.fixture
def hosts(monkeypatch):
    FakeAdmin.asked = []
    monkeypatch.setattr(reassignment_plan, "KafkaAdminHook", FakeAdmin)
    measured: dict[int, object] = {}

    def space(profile, bid):
        answer = measured[bid]
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(reassignment_plan, "unstarted_broker_space", space)
    return measured


# broker 3 (not started) and broker 1 (started) receive 2 GB each
MOVES = (Move("t", 0, (3, 1), (0, 2), 1_000_000_000), Move("t", 1, (3, 2), (0, 2), 1_000_000_000),
         Move("t", 2, (1, 2), (0, 2), 1_000_000_000))


def test_a_not_started_broker_is_measured_on_its_host_and_judged_with_the_rest(hosts, caplog, capsys):
    hosts[3] = {"/new/data": 5_000_000_000}
    with caplog.at_level(logging.INFO):
        operator(dry_run=True)._check_disk(None, MOVES, [3])
    said = capsys.readouterr().out + caplog.text
    assert FakeAdmin.asked == [[1]], "only started brokers are asked over DescribeLogDirs"
    assert "broker 3 is not started: its log dirs measured on its host (df): /new/data 5000000000 bytes usable" \
        in said
    assert "broker 3: 2000000000 bytes to receive, 5000000000 usable" in said


def test_a_not_started_broker_short_of_space_is_named_in_a_dry_run(hosts, caplog, capsys):
    hosts[3] = {"/new/data": 2_100_000_000}  # 2 GB + the 10 % margin does not fit
    with caplog.at_level(logging.INFO):
        operator(dry_run=True)._check_disk(None, MOVES, [3])
    said = capsys.readouterr().out + caplog.text
    assert "DRY RUN: disk preflight: a real run would stop here, nothing moved: broker 3: receives 2.00 GB, its " \
           "log dirs have 2.10 GB usable (needs 2.20 GB with a 10% margin)" in said


def test_a_host_that_cannot_be_measured_is_logged_not_judged(hosts, caplog, capsys):
    hosts[3] = AirflowFailException("broker 3 (10.0.0.3): df gave no byte count for /d")
    with caplog.at_level(logging.INFO):
        operator(dry_run=True)._check_disk(None, MOVES, [3])
    said = capsys.readouterr().out + caplog.text
    assert "broker 3 is not started and its log dirs could not be measured (broker 3 (10.0.0.3): df gave no byte " \
           "count for /d): it would receive 2000000000 bytes" in said
    assert FakeAdmin.asked == [[1]]


def test_a_real_run_short_of_space_stops_naming_the_broker(hosts, monkeypatch):
    monkeypatch.setattr(FakeAdmin, "log_dir_space", lambda self, brokers: {b: {"/data": 100} for b in brokers})
    with pytest.raises(AirflowFailException, match=r"2 receiving brokers lack space for the plan \(nothing was "
                                                   r"moved\): broker 1: receives 2.00 GB.*; broker 3: receives "
                                                   r"2.00 GB"):
        operator(dry_run=False)._check_disk(None, MOVES, [])
