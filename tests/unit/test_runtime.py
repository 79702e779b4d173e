"""The operators' run-time helpers, without servers: params (``runtime.params``), failure typing
(``runtime.failures``), waiting (``runtime.waiting``) with a fake clock, the text sent to a broker host
(``runtime.broker_commands.remote_command``) and how a step's command is chosen (``BrokerCommand.choose``).
"""

from __future__ import annotations

import logging
import os
import shlex
import shutil
import subprocess
from pathlib import Path

import paramiko
import pytest
import requests
from confluent_kafka import KafkaError, KafkaException
from hooks.broker_ssh import END_MARK, BrokerHostKeyError, BrokerShell, IncompleteOutput
from hooks.burrow import BurrowClusterUnknown, BurrowError
from kafka.errors import KafkaConnectionError
from kafka_ops.profile import ClusterProfile
from kazoo.exceptions import ConnectionLoss
from kazoo.handlers.threading import KazooTimeoutError
from runtime.broker_commands import STEPS, BrokerCommand, BrokerCommandFailed, remote_command
from runtime.failures import Misconfiguration, describe, is_transient
from runtime.params import FromParam, is_true, resolve_settings, unknown_conf_keys
from runtime.waiting import Check, WaitAborted, WaitTimeout, call_until_answered, wait_until

_KEY = paramiko.RSAKey.generate(1024)
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

PARAMS = ["brokers", "cluster", "consumer_groups", "dry_run", "keep_order", "lock_wait", "pre_stop", "soak_s"]


# --- params ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("value, expected", [
    (True, True), ("True", True), ("true", True), (" TRUE ", True), ("1", True), (1, True),
    (False, False), ("False", False), ("false", False), ("0", False), (0, False), (None, False), ("", False),
    ("yes", False), ("None", False),
])
def test_is_true(value: object, expected: bool) -> None:
    assert is_true(value) is expected


def test_a_typo_in_the_conf_suggests_the_closest_param() -> None:
    assert unknown_conf_keys({"broker": [1]}, PARAMS) == ["unknown param 'broker'; did you mean 'brokers'?"]
    assert unknown_conf_keys({"dryrun": True, "clustr": "c"}, PARAMS) == [
        "unknown param 'clustr'; did you mean 'cluster'?",
        "unknown param 'dryrun'; did you mean 'dry_run'?",
    ]


def test_a_key_like_no_param_lists_the_params() -> None:
    assert unknown_conf_keys({"zzz": 1}, PARAMS) == [f"unknown param 'zzz'; params are {sorted(PARAMS)}"]


@pytest.mark.parametrize("conf", [None, {}, {"brokers": [1], "dry_run": True}])
def test_known_or_no_conf_keys_are_fine(conf: dict | None) -> None:
    assert unknown_conf_keys(conf, PARAMS) == []


def test_unknown_conf_keys_takes_any_iterable_of_param_names() -> None:
    params = {"brokers": [], "cluster": "c"}
    assert unknown_conf_keys({"brokers": [], "brokerz": []}, params.keys()) == [
        "unknown param 'brokerz'; did you mean 'brokers'?"]


def test_resolve_settings_reads_params_and_keeps_values() -> None:
    settings = {"cluster": FromParam("cluster"), "lock_wait": "fail", "timeout": 30, "groups": FromParam("groups")}
    params = {"cluster": "kafka_prod", "groups": ["3.10", None], "unused": 1}
    assert resolve_settings(settings, params) == {"cluster": "kafka_prod", "lock_wait": "fail", "timeout": 30,
                                                  "groups": ["3.10", None]}
    assert settings["cluster"] == FromParam("cluster"), "the settings are not changed"


def test_resolve_settings_names_a_param_the_dag_lacks() -> None:
    with pytest.raises(KeyError, match="setting 'lock_wait' reads param 'lock_wait', which the DAG does not define"):
        resolve_settings({"lock_wait": FromParam("lock_wait")}, {"cluster": "c"})


# --- failures --------------------------------------------------------------------------------------


@pytest.mark.parametrize("exc", [
    KafkaException(KafkaError(KafkaError._TRANSPORT)),
    KafkaConnectionError("Connection at 10.0.0.4:9092 closed"),
    requests.ConnectionError("refused"),
    requests.Timeout("slow"),
    BurrowError("HTTP 502"),
    KazooTimeoutError("Connection time-out"),
    ConnectionLoss(),
    paramiko.SSHException("Error reading SSH protocol banner"),
    ConnectionRefusedError(111, "Connection refused"),
    TimeoutError("timed out"),
    EOFError(),
], ids=lambda e: type(e).__name__)
def test_transient_errors(exc: BaseException) -> None:
    assert is_transient(exc)


@pytest.mark.parametrize("exc", [
    ValueError("bad profile"),
    KeyError("gate"),
    Misconfiguration("no zookeeper"),
    BurrowClusterUnknown("no cluster 'x'"),
    paramiko.BadHostKeyException("[10.0.0.4]:22", _KEY, _KEY),
    paramiko.AuthenticationException("denied"),
    BrokerHostKeyError("no host key"),
    RuntimeError("bug"),
], ids=lambda e: type(e).__name__)
def test_fatal_errors(exc: BaseException) -> None:
    assert not is_transient(exc)


def test_describe_is_one_line_of_type_and_text() -> None:
    assert describe(ValueError("bad\n  profile\tfield")) == "ValueError: bad profile field"
    assert describe(EOFError()) == "EOFError: EOFError()"
    assert len(describe(RuntimeError("x" * 2000))) == 500


# --- wait_until ------------------------------------------------------------------------------------


class FakeTime:
    """A clock that only moves when the code under test sleeps."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def script(*answers: Check | BaseException):
    """A check that gives ``answers`` in turn (an exception is raised), the last one repeating."""
    queue = list(answers)
    calls: list[int] = []

    def check() -> Check:
        calls.append(1)
        answer = queue.pop(0) if len(queue) > 1 else queue[0]
        if isinstance(answer, BaseException):
            raise answer
        return answer

    check.calls = calls  # type: ignore[attr-defined]
    return check


LOG = logging.getLogger("test_runtime.wait")


def wait(check, t: FakeTime, **kwargs) -> Check:
    kwargs.setdefault("what", "broker 3 is back in every ISR")
    kwargs.setdefault("interval_s", 5)
    kwargs.setdefault("timeout_s", 60)
    return wait_until(check, log=LOG, sleep=t.sleep, clock=t.clock, **kwargs)


def test_passes_at_once_without_sleeping(caplog: pytest.LogCaptureFixture) -> None:
    t = FakeTime()
    caplog.set_level(logging.INFO, logger=LOG.name)
    check = script(Check(True, "caught-up: OK"))
    assert wait(check, t) == Check(True, "caught-up: OK")
    assert t.sleeps == [] and len(check.calls) == 1
    assert "broker 3 is back in every ISR: yes (caught-up: OK)" in caplog.messages


def test_polls_every_interval_until_it_passes(caplog: pytest.LogCaptureFixture) -> None:
    t = FakeTime()
    caplog.set_level(logging.INFO, logger=LOG.name)
    check = script(Check(False, "orders-1: broker 3 not in isr [1, 2]"), Check(False, "still"), Check(True, "ok"))
    assert wait(check, t).message == "ok"
    assert t.sleeps == [5, 5] and len(check.calls) == 3
    not_yet = [r for r in caplog.records if "not yet" in r.getMessage()]
    assert [r.levelno for r in not_yet] == [logging.INFO, logging.INFO]
    assert not_yet[0].getMessage() == "broker 3 is back in every ISR: not yet: orders-1: broker 3 not in isr [1, 2]"


def test_polls_through_transient_errors_and_logs_the_cause(caplog: pytest.LogCaptureFixture) -> None:
    t = FakeTime()
    caplog.set_level(logging.INFO, logger=LOG.name)
    check = script(KafkaException(KafkaError(KafkaError._TRANSPORT, "broker down")),
                   requests.ConnectionError("Burrow refused"), Check(True, "ok"))
    assert wait(check, t, interval_s=2).ok
    assert t.sleeps == [2, 2]
    warnings = [r.getMessage() for r in caplog.records if "could not check" in r.getMessage()]
    assert len(warnings) == 2
    assert warnings[0].startswith("broker 3 is back in every ISR: could not check: KafkaException: ")
    assert "broker down" in warnings[0] and warnings[0].endswith("; trying again")
    assert "ConnectionError: Burrow refused" in warnings[1]


@pytest.mark.parametrize("error", [Misconfiguration("profile 'c' sets no zookeeper"), ValueError("bad"),
                                   KeyError("gate")], ids=lambda e: type(e).__name__)
def test_a_fatal_error_aborts_at_once(error: BaseException) -> None:
    t = FakeTime()
    check = script(Check(False, "not yet"), error, Check(True, "never reached"))
    with pytest.raises(WaitAborted, match=r"^broker 3 is back in every ISR: cannot check: ") as err:
        wait(check, t)
    assert type(error).__name__ in str(err.value) and "waiting cannot fix this" in str(err.value)
    assert err.value.__cause__ is error
    assert len(check.calls) == 2 and t.sleeps == [5]


def test_timeout_names_what_the_timeout_and_the_last_verdict() -> None:
    t = FakeTime()
    check = script(Check(False, "orders-1: broker 3 not in isr [1, 2]"), Check(False, "orders-2: broker 3 not in isr"))
    with pytest.raises(WaitTimeout) as err:
        wait(check, t, interval_s=10, timeout_s=30)
    message = str(err.value)
    assert message == ("gave up after 30 s (4 checks) waiting until broker 3 is back in every ISR: "
                       "orders-2: broker 3 not in isr")
    # checks at 0, 10, 20, 30 s: never past the deadline
    assert t.sleeps == [10, 10, 10] and t.now - 1000 <= 30


def test_a_timeout_whose_last_check_ran_long_says_how_long_the_wait_took() -> None:
    """A Burrow that does not answer holds each check for its HTTP retries (up to about 45 s): a gate of 30 s
    said "gave up after 30 s" 46 s after it began. The message now says how long it took in all."""
    t = FakeTime()

    def slow_check() -> Check:
        t.now += 16  # the check's own time: retries of a request that is not answered
        raise ConnectionError("Read timed out. (read timeout=10.0)")

    with pytest.raises(WaitTimeout) as err:
        wait(slow_check, t, interval_s=5, timeout_s=30)
    message = str(err.value)
    assert message.startswith("gave up after 30 s (2 checks) waiting until broker 3 is back in every ISR: could not "
                              "check: ConnectionError"), message
    assert message.endswith(" [the wait took 37 s: its last check ran past the timeout]"), message


def test_timeout_after_transient_errors_names_the_last_error() -> None:
    t = FakeTime()
    check = script(Check(False, "urp: 3 partitions"), KazooTimeoutError("Connection time-out"))
    with pytest.raises(WaitTimeout, match=r"gave up after 12 s \(\d+ checks\) waiting until the lock is free: "
                                          r"could not check: KazooTimeoutError: Connection time-out"):
        wait(check, t, what="the lock is free", interval_s=4, timeout_s=12)


def test_a_timeout_shorter_than_the_interval_checks_once() -> None:
    t = FakeTime()
    check = script(Check(False, "no"))
    with pytest.raises(WaitTimeout, match=r"gave up after 1 s \(1 checks\)"):
        wait(check, t, interval_s=5, timeout_s=1)
    assert t.sleeps == []


def test_a_wait_logs_info_naming_what_it_waits_for(caplog: pytest.LogCaptureFixture) -> None:
    """Waiting is the normal course of a roll: INFO, never WARNING (a person is needed only at the deadline), for a
    failing check and for a transient error alike."""
    t = FakeTime()
    caplog.set_level(logging.INFO, logger=LOG.name)
    check = script(Check(False, "gate broker 2: urp (1): orders-0: under-replicated"),
                   KazooTimeoutError("Connection time-out"), Check(True, "gate: OK"))
    wait(check, t, what="broker 2 may be stopped", not_yet="broker 2 may not be stopped yet")
    assert [r.getMessage() for r in caplog.records] == [
        "broker 2 may not be stopped yet: gate broker 2: urp (1): orders-0: under-replicated",
        "broker 2 may be stopped: could not check: KazooTimeoutError: Connection time-out; trying again",
        "broker 2 may be stopped: yes (gate: OK)"]
    assert {r.levelno for r in caplog.records} == {logging.INFO}


def test_an_answered_call_logs_that_it_was_answered_not_a_verdict(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=LOG.name)
    assert call_until_answered(lambda: False, what="the cluster's mode (DescribeQuorum)", interval_s=1, timeout_s=5,
                               log=LOG) is False
    assert caplog.messages == ["the cluster's mode (DescribeQuorum): answered"]


# --- remote_command --------------------------------------------------------------------------------

HOSTILE = [
    "kafka-service stop",
    'echo "double quoted" \'single quoted\'',
    "it's",
    "$(touch /tmp/kafka-ops-pwned) `touch /tmp/kafka-ops-pwned`",
    "a; b && c || d | e & f",
    "line one\nline two",
    "back\\slash \\' \\\" $HOME ${PATH} * ? [a] ~",
    "",
    "   leading and trailing spaces   ",
    "'; rm -rf / #",
    "ünïcødé ✓",
]


@pytest.mark.parametrize("command", HOSTILE)
def test_remote_command_parses_back_to_one_bash_c_argument(command: str) -> None:
    text = remote_command(command, 3)
    assert shlex.split(text) == ["KAFKA_BROKER_ID=3", "bash", "-c", command]
    assert text.startswith("KAFKA_BROKER_ID=3 bash -c ")


@pytest.fixture
def fake_bash(tmp_path: Path) -> Path:
    """A directory with a ``bash`` that prints $KAFKA_BROKER_ID and its arguments, NUL-separated."""
    stub = tmp_path / "bin" / "bash"
    stub.parent.mkdir()
    stub.write_text('#!/bin/sh\nprintf "%s\\0" "$KAFKA_BROKER_ID" "$@"\n')
    stub.chmod(0o755)
    return stub.parent


@pytest.mark.parametrize("login_shell", ["/bin/sh", "/bin/bash"])
@pytest.mark.parametrize("command", HOSTILE)
def test_remote_shell_hands_bash_exactly_the_command(fake_bash: Path, login_shell: str, command: str,
                                                     tmp_path: Path) -> None:
    """What sshd does with the text: ``<login shell> -c TEXT``; bash must get ``-c`` and the command (a
    stand-in ``bash`` on PATH only prints what it got, so hostile commands are never executed)."""
    if not Path(login_shell).exists():
        pytest.skip(f"{login_shell} not installed")
    env = {**os.environ, "PATH": f"{fake_bash}:{os.environ['PATH']}"}
    out = subprocess.run([login_shell, "-c", remote_command(command, 12)], env=env, capture_output=True,
                         check=True, cwd=tmp_path, timeout=10).stdout
    assert out.decode().split("\0")[:-1] == ["12", "-c", command]
    assert list(tmp_path.iterdir()) == [fake_bash], "nothing in the command was executed"
    assert not Path("/tmp/kafka-ops-pwned").exists()


def test_remote_command_runs_the_command_in_real_bash() -> None:
    if shutil.which("bash") is None:
        pytest.skip("bash not installed")
    command = 'printf %s "$BASH_EXECUTION_STRING"; echo " id=$KAFKA_BROKER_ID sub=$(echo \'a;b\')"'
    for login_shell in ("/bin/sh", "/bin/bash"):
        if not Path(login_shell).exists():
            continue
        out = subprocess.run([login_shell, "-c", remote_command(command, 5)], capture_output=True, check=True,
                             text=True, timeout=10).stdout
        assert out == command + " id=5 sub=a;b\n", login_shell


def test_remote_command_quotes_a_hostile_broker_id() -> None:
    text = remote_command("true", "1; touch /tmp/kafka-ops-pwned")  # type: ignore[arg-type]
    assert shlex.split(text)[0] == "KAFKA_BROKER_ID=1; touch /tmp/kafka-ops-pwned"
    assert len(shlex.split(text)) == 4


# --- BrokerCommand.choose --------------------------------------------------------------------------


def profile(**extra) -> ClusterProfile:
    base = {"ssh_conn_id": "ssh", "service_stop": "svc stop {broker_id}", "service_start": "svc start",
            "commands": {"drain-lb": "lb drain kafka-{broker_id}", "show": "echo $KAFKA_BROKER_ID"}}
    return ClusterProfile.from_connection_fields("kafka_prod", "b1:9092", {**base, **extra})


BROKER = {"id": 4, "host": "10.0.0.4", "rack": "r1", "position": 2, "total": 3}


def test_choose_the_service_commands_for_stop_and_start() -> None:
    stop = BrokerCommand.choose(profile(), "stop", None, BROKER)
    assert stop == BrokerCommand("stop", 4, "10.0.0.4", "svc stop 4", "service command (service_stop)")
    assert stop.describe() == "broker 4 (10.0.0.4): stop: service command (service_stop): svc stop 4"
    assert BrokerCommand.choose(profile(), "start", "  ", BROKER).text == "svc start"


@pytest.mark.parametrize("step", ["pre_stop", "pre_start"])
def test_choose_nothing_for_a_pre_step_not_asked_for(step: str) -> None:
    assert BrokerCommand.choose(profile(), step, None, BROKER) is None
    assert BrokerCommand.choose(profile(), step, "", BROKER) is None


def test_choose_a_named_command_for_any_step() -> None:
    for step in STEPS:
        chosen = BrokerCommand.choose(profile(), step, "drain-lb", BROKER)
        assert (chosen.step, chosen.text, chosen.origin) == (step, "lb drain kafka-4", "profile command 'drain-lb'")


def test_choose_refuses_shell_text_unless_the_profile_allows_it() -> None:
    with pytest.raises(ValueError, match=r"pre_stop 'rm -rf /data' is not a command named in connection "
                                         r"'kafka_prod' \(named commands: \['drain-lb', 'show'\]\)"):
        BrokerCommand.choose(profile(), "pre_stop", "rm -rf /data", BROKER)
    adhoc = BrokerCommand.choose(profile(allow_adhoc_commands=True), "pre_stop", "touch /tmp/{broker_id}", BROKER)
    assert (adhoc.text, adhoc.origin) == ("touch /tmp/4", "ad-hoc command (allow_adhoc_commands)")


def test_choose_refuses_an_unknown_step() -> None:
    with pytest.raises(ValueError, match=r"step must be one of \('pre_stop', 'stop', 'pre_start', 'start'\), "
                                         r"got 'restart'"):
        BrokerCommand.choose(profile(), "restart", "drain-lb", BROKER)


def test_dry_run_only_logs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=LOG.name)
    command = BrokerCommand.choose(profile(), "stop", None, BROKER)
    # no SSH connection exists here: a real run would fail; a dry run must not try
    assert command.run("no_such_ssh_conn", 10, LOG, dry_run=True, triggered_by="alice") == 0
    assert caplog.messages == ["DRY RUN: would run broker 4 (10.0.0.4): stop: service command (service_stop): "
                               "svc stop 4 (run triggered by alice)"]


def test_broker_command_failed_is_not_transient() -> None:
    assert not is_transient(BrokerCommandFailed("stop on broker 1 exited 1"))


def test_ramp_polls_quickly_first_then_at_the_interval() -> None:
    """The pause is ``ramp_from_s`` while a quarter of the time waited is less, then that quarter (growing by a
    quarter each look), then the interval."""
    t = FakeTime()
    check = script(*[Check(False, "not yet")] * 20, Check(True, "back"))
    result = wait(check, t, ramp_from_s=0.5)
    assert result.ok and len(check.calls) == 21
    assert t.sleeps[:5] == [0.5] * 5  # 0 to 2.5 s waited
    assert t.sleeps[5:8] == [pytest.approx(0.625), pytest.approx(0.78125), pytest.approx(0.9765625)]
    assert max(t.sleeps) == 5 and t.sleeps[-3:] == [5, 5, 5]
    assert t.sleeps == sorted(t.sleeps)


@pytest.mark.parametrize("true_after_s", [0.05, 0.3, 1.6, 3.0, 7.5, 19.0, 40.0])
def test_a_ramping_wait_sees_a_condition_at_most_a_quarter_late(true_after_s: float) -> None:
    """Doubling pauses (0.1, 0.2, 0.4 ...) saw a broker back 1.6 s after its start only after 3.1 s: at most a
    quarter of the time waited late now (or the first pause, or the interval once it is reached)."""
    t = FakeTime()
    start = t.now
    result = wait(lambda: Check(t.now - start >= true_after_s, "ISR"), t, ramp_from_s=0.1, timeout_s=120)
    seen = t.now - start
    assert result.ok
    assert true_after_s <= seen <= true_after_s + min(5, max(0.1, 0.25 * true_after_s)) + 1e-9, (seen, t.sleeps)


def test_controller_commands_come_from_the_profile_and_say_controller(caplog: pytest.LogCaptureFixture) -> None:
    from runtime.broker_commands import controller_command

    profile = ClusterProfile.from_connection_fields("c", "b:9092", {"controller_service_stop": "ctl stop {broker_id}"})
    stop = controller_command(profile, "stop", {"id": 101, "host": "ctrl-101"})
    assert (stop.step, stop.broker_id, stop.host, stop.text, stop.node) == ("stop", 101, "ctrl-101", "ctl stop 101",
                                                                            "controller")
    assert stop.describe() == ("controller 101 (ctrl-101): stop: controller service command (controller_service_stop):"
                               " ctl stop 101")
    status = controller_command(profile, "status", {"id": 101, "host": "ctrl-101"})
    assert status.text == "sudo systemctl is-active kafka" and "no controller_service_status" in status.origin
    with caplog.at_level(logging.INFO):
        stop.run("ssh", 10, logging.getLogger("test"), dry_run=True)
    assert "DRY RUN: would run controller 101 (ctrl-101): stop" in caplog.text


def test_a_status_command_returns_its_exit_code_instead_of_failing(monkeypatch: pytest.MonkeyPatch) -> None:
    from runtime import broker_commands
    from runtime.broker_commands import controller_command

    class Shell:
        def __init__(self, ssh_conn_id: str, host: str, conn: object = None) -> None:
            self.host = host

        def run(self, command: str, timeout_s: float) -> tuple[int, str, str]:
            assert command == "KAFKA_BROKER_ID=100 bash -c 'sudo systemctl is-active kafka'"
            return 3, "inactive\n", ""

    monkeypatch.setattr(broker_commands, "BrokerShell", Shell)
    profile = ClusterProfile.from_connection_fields("c", "b:9092", {})
    assert controller_command(profile, "status", {"id": 100, "host": "h"}).status("ssh", 5) == (3, "inactive\n")


def _shell_answering(replies: list[str]) -> tuple[BrokerShell, list[str]]:
    """A BrokerShell whose ``collect`` answers the given stdouts in turn (no SSH), and the commands it got."""
    shell = object.__new__(BrokerShell)
    shell.host = "broker-1"
    sent: list[str] = []

    def run(command: str, timeout_s: float) -> tuple[int, str, str]:
        sent.append(command)
        return 0, replies.pop(0), ""

    shell.collect = run  # type: ignore[method-assign]
    return shell, sent


def test_read_asks_again_when_the_output_came_back_without_its_end_mark() -> None:
    whole = "broker.id=1\nlog.dirs=/data\n"
    shell, sent = _shell_answering(["", "broker.id=1\n", f"{whole}\n{END_MARK} 0\n"])
    assert shell.read("cat server.properties", timeout_s=5) == (0, whole, "")
    assert len(sent) == 3 and all(c.startswith("( cat server.properties\n); printf") for c in sent)


def test_read_gives_the_command_exit_code_and_fails_after_the_attempts() -> None:
    shell, _ = _shell_answering([f"partial\n{END_MARK} 3\n"])
    assert shell.read("false", timeout_s=5) == (3, "partial", "")
    shell, sent = _shell_answering(["x", "y"])
    with pytest.raises(IncompleteOutput, match="broker-1: .* incomplete 2 times"):
        shell.read("cat f", timeout_s=5, attempts=2)
    assert len(sent) == 2


def test_a_check_that_knows_when_its_answer_can_change_is_looked_at_then() -> None:
    """A failing look with ``retry_in_s`` (a lag gate's next counted poll) sets the pause, at most the interval; the
    ramp goes on for looks without it."""
    t = FakeTime()
    check = script(Check(False, "lag: 2/3 OK polls", retry_in_s=3.2), Check(False, "lag: 2/3", retry_in_s=9.0),
                   Check(False, "URP 1"), Check(False, "lag", retry_in_s=-1.0), Check(True, "OK"))
    result = wait(check, t, ramp_from_s=0.1)
    # the third pause is the ramp's: a quarter of the 8.2 s waited
    assert result.ok and t.sleeps == [3.2, 5, pytest.approx(2.05), 0.0] and len(check.calls) == 5
