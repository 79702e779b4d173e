"""The preflight's rules (``kafka_ops.preflight``): the programs a command needs, the probe a host runs (run here
with bash on a directory laid out like a broker host), and how its answer is read."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from kafka_ops.preflight import LAUNCHER, HostNeeds, probe_script, problems, program, report


@pytest.mark.parametrize("command, expected", [
    ("systemctl stop kafka", "systemctl"),
    ("KAFKA_HEAP_OPTS=-Xmx1g A=b kafka-service start", "kafka-service"),
    ("sudo -u kafka systemctl stop kafka", "sudo"),
    ("/opt/kafka/bin/kafka-server-stop.sh", "/opt/kafka/bin/kafka-server-stop.sh"),
    ("drain-lb 3 && sleep 5", "drain-lb"),
    ("$KAFKA_HOME/bin/kafka-server-stop.sh", None),
    ('"unbalanced', None),
    ("", None),
])
def test_the_program_a_command_runs_first(command, expected) -> None:
    assert program(command) == expected


def host(tmp_path: Path, unpacked: str | None = "3.7.1", jars: bool = True, launcher: bool = True) -> Path:
    """A broker host's Kafka layout: ``kafka -> kafka_2.13-3.6.2`` and, optionally, the target beside it."""
    (tmp_path / "kafka_2.13-3.6.2" / "libs").mkdir(parents=True)
    (tmp_path / "kafka").symlink_to("kafka_2.13-3.6.2")
    (tmp_path / "server.properties").write_text("broker.id=0\n")
    if unpacked:
        target = tmp_path / f"kafka_2.13-{unpacked}"
        (target / "libs").mkdir(parents=True)
        (target / "bin").mkdir()
        if jars:
            (target / "libs" / "kafka_2.13.jar").write_bytes(b"PK")
        if launcher:
            (target / LAUNCHER).write_text("#!/bin/sh\n")
            (target / LAUNCHER).chmod(0o755)
    return tmp_path


def probe(needs: HostNeeds) -> list[str]:
    out = subprocess.run(["bash", "-c", probe_script(needs)], capture_output=True, text=True, timeout=30).stdout
    return problems(needs, out)


def needs(root: Path, *commands: str, release: str | None = "3.7.1") -> HostNeeds:
    return HostNeeds("broker 0", "h0", commands, release, str(root / "kafka"), str(root / "server.properties"))


def test_a_ready_host_has_no_problem(tmp_path) -> None:
    assert probe(needs(host(tmp_path), "bash -c true", "ls -l")) == []


def test_every_problem_of_a_host_is_found_at_once(tmp_path) -> None:
    root = host(tmp_path, unpacked=None)
    found = probe(needs(root, "no-such-stopper --now", "drain-lb 3", "ls"))
    assert found == ["no-such-stopper: not found on the PATH of the SSH user",
                     "drain-lb: not found on the PATH of the SSH user",
                     f"no unpacked Kafka 3.7.1 in {root}"]


@pytest.mark.parametrize("jars, launcher, says", [(False, True, "libs holds no jar"),
                                                  (True, False, f"{LAUNCHER} missing or not executable")])
def test_an_incomplete_release_is_named(tmp_path, jars, launcher, says) -> None:
    found = probe(needs(host(tmp_path, jars=jars, launcher=launcher)))
    assert len(found) == 1 and found[0].endswith(says), found


def test_a_kafka_home_that_is_no_symlink_and_a_missing_properties_file(tmp_path) -> None:
    root = host(tmp_path)
    (root / "kafka").unlink()
    (root / "kafka").mkdir()
    (root / "server.properties").unlink()
    assert probe(needs(root)) == [f"{root / 'kafka'} is not a symbolic link",
                                  f"{root / 'server.properties'} is not readable"]


def test_a_probe_cut_short_is_a_problem_and_the_report_names_each_host() -> None:
    n = HostNeeds("broker 1", "h1", ("ls",))
    assert problems(n, "program:ls\tok\n") == ["the preflight probe did not finish (its output was cut short)"]
    assert report({"broker 1": ["a", "b"], "broker 2": [], "controller 100": ["c"]},
                  {"broker 1": "h1", "controller 100": "c1"}) == "broker 1 (h1): a; b | controller 100 (c1): c"
    assert report({"broker 1": []}, {}) == ""


# -- disk space for a reassignment ----------------------------------------------------------------------------


def test_bytes_to_receive_counts_each_adding_replica_once() -> None:
    from kafka_ops.plan_files import Move
    from kafka_ops.preflight import bytes_to_receive

    moves = [Move("t", 0, (3, 1), (1, 2), 100), Move("t", 1, (3, 4), (1, 2), 50), Move("t", 2, (2, 1), (1, 2), 70),
             Move("u", 0, (1, 2), (2, 1), 9)]
    assert bytes_to_receive(moves) == {3: 150, 4: 50}, "a reorder copies nothing"


def test_disk_problems_name_each_short_broker_and_note_the_unreported() -> None:
    from kafka_ops.preflight import disk_problems

    receive = {1: 1_000_000_000, 2: 5_000_000, 3: 10, 4: 10}
    usable = {1: {"/data/a": 600_000_000, "/data/b": 450_000_000}, 2: {"/data": 900_000_000_000},
              3: {"/data": -1}}
    problems_found, notes = disk_problems(receive, usable)
    assert problems_found == [
        "broker 1: receives 1.00 GB, its log dirs have 1.05 GB usable (needs 1.10 GB with a 10% margin): "
        "/data/a 600.00 MB, /data/b 450.00 MB",
        "broker 4: no log dir reported (DescribeLogDirs): cannot place 10 B"]
    assert notes == ["broker 3: its log dirs report no free space (Kafka before 3.3): 10 B to receive not checked "
                     "against it"]
    assert disk_problems({1: 900_000_000}, usable) == ([], [])


def test_log_dir_usable_bytes_from_kafka_pythons_answer() -> None:
    from hooks.kafka_admin import log_dir_usable_bytes

    raw = [{"broker": 1, "log_dirs": [{"log_dir": "/a", "error_code": 0, "usable_bytes": 7, "topics": []},
                                      {"log_dir": "/b", "error_code": 57, "usable_bytes": 3}]},
           {"broker": 2, "log_dirs": [{"log_dir": "/a", "error_code": 0, "topics": []}]}]
    assert log_dir_usable_bytes(raw) == {1: {"/a": 7}, 2: {"/a": -1}}
