"""The broker roll's record and decision rules (``kafka_ops.roll``): pure, no servers."""

from __future__ import annotations

import json

import pytest
from kafka_ops.roll import (
    PHASES,
    STEPS,
    BrokerProgress,
    Decision,
    RollRecord,
    batch_grid_label,
    clock,
    decide,
    eta_s,
    grid_label,
    labelled_batch,
    left_alone,
    left_alone_mark,
    summary,
    turn,
)
from kafka_ops.roll_spec import requested

T0 = 1_700_000_000_000  # 22:13:20 UTC
STEPS_3 = tuple({"id": b, "host": f"h{b}", "rack": None, "position": i + 1, "total": 3}
                for i, b in enumerate([2, 0, 1]))


def record(**phases: str | None) -> RollRecord:
    """A roll over brokers [2, 0, 1] with ``b<id>=<phase>`` progress, each phase reached at T0."""
    rec = RollRecord("restart", T0, STEPS_3)
    for name, phase in phases.items():
        if phase is not None:
            rec = rec.mark(int(name.removeprefix("b")), phase, T0, "restarted" if phase == "done" else "")
    return rec


# --- clock -----------------------------------------------------------------------------------------


def test_clock_is_utc_time_of_day() -> None:
    assert clock(T0) == "22:13:20 UTC"
    assert clock(0) == "00:00:00 UTC"
    assert clock(T0 + 61_999) == "22:14:21 UTC"


# --- the record ------------------------------------------------------------------------------------


def test_an_empty_record() -> None:
    rec = RollRecord("restart", T0, STEPS_3)
    assert rec.order == [2, 0, 1]
    assert rec.progress(2) is None and rec.phase(2) is None and not rec.is_done(2)
    assert rec.finished() == []


def test_mark_returns_a_copy_and_walks_forward() -> None:
    empty = RollRecord("restart", T0, STEPS_3)
    stopping = empty.mark(0, "stopping", T0 + 1, "stop sent by alice")
    assert empty.phase(0) is None, "mark does not change the record it was called on"
    assert stopping.progress(0) == BrokerProgress(0, "stopping", T0 + 1, "stop sent by alice", 0.0)
    rec = stopping
    for i, phase in enumerate(PHASES[1:], start=2):
        rec = rec.mark(0, phase, T0 + i)
        assert rec.phase(0) == phase
    assert rec.is_done(0) and rec.finished() == [0]
    # the same phase again is allowed (a resumed start is sent again)
    assert rec.mark(0, "done", T0 + 99, "restarted", 12.5).progress(0).took_s == 12.5
    # a phase can be skipped (a broker that needs nothing goes straight to done)
    assert empty.mark(1, "done", T0, "left alone: running 3.7.1").phase(1) == "done"


@pytest.mark.parametrize("current, back", [("stopped", "stopping"), ("done", "starting"), ("prepared", "stopped"),
                                           ("starting", "prepared")])
def test_mark_refuses_to_go_back_a_phase(current: str, back: str) -> None:
    rec = RollRecord("ibp", T0, STEPS_3).mark(1, current, T0)
    with pytest.raises(ValueError, match=f"broker 1: roll 'ibp' cannot go from {current} back to {back}"):
        rec.mark(1, back, T0 + 1)
    assert rec.phase(1) == current


def test_mark_refuses_an_unknown_phase() -> None:
    # (the message is tuple.index's "x not in tuple": _rank() runs before BrokerProgress validates the phase)
    with pytest.raises(ValueError):
        RollRecord("restart", T0, STEPS_3).mark(1, "restarting", T0)
    with pytest.raises(ValueError):
        RollRecord("restart", T0, STEPS_3).mark(1, "stopping", T0).mark(1, "restarting", T0)


def test_finished_keeps_roll_order() -> None:
    rec = record(b1="done", b2="done", b0="starting")
    assert rec.finished() == [2, 1]


def test_to_dict_from_dict_round_trip_through_json() -> None:
    rec = (RollRecord("restart", T0, STEPS_3, consumer_groups=("billing", "search"))
           .mark(2, "done", T0 + 5, "restarted", 81.5)
           .mark(0, "stopping", T0 + 9, "stop sent by alice"))
    data = rec.to_dict()
    assert data == {
        "roll_id": "restart",
        "began_ms": T0,
        "steps": [dict(s) for s in STEPS_3],
        "consumer_groups": ["billing", "search"],
        "brokers": {
            "0": {"phase": "stopping", "at_ms": T0 + 9, "reason": "stop sent by alice", "took_s": 0.0},
            "2": {"phase": "done", "at_ms": T0 + 5, "reason": "restarted", "took_s": 81.5},
        },
        "lag_ok": None,
    }
    back = RollRecord.from_dict(json.loads(json.dumps(data)))
    assert back.to_dict() == data
    assert back.order == [2, 0, 1] and back.consumer_groups == ("billing", "search")
    assert back.progress(2) == rec.progress(2) and back.phase(0) == "stopping" and back.phase(1) is None


def test_no_lag_gate_survives_the_round_trip_as_none() -> None:
    rec = RollRecord("restart", T0, STEPS_3)
    assert rec.to_dict()["consumer_groups"] is None
    assert RollRecord.from_dict(rec.to_dict()).consumer_groups is None
    assert RollRecord.from_dict({**rec.to_dict(), "consumer_groups": []}).consumer_groups == ()


def test_from_dict_fills_optional_fields() -> None:
    rec = RollRecord.from_dict({"roll_id": "restart", "began_ms": "5", "brokers": {"3": {"phase": "stopped",
                                                                                          "at_ms": 7}}})
    assert (rec.began_ms, rec.steps, rec.consumer_groups) == (5, (), None)
    assert rec.progress(3) == BrokerProgress(3, "stopped", 7, "", 0.0)


@pytest.mark.parametrize("data, cause", [
    ({"began_ms": T0}, "KeyError('roll_id')"),
    ({"roll_id": "r"}, "KeyError('began_ms')"),
    ({"roll_id": "r", "began_ms": "soon"}, "ValueError"),
    ({"roll_id": "r", "began_ms": T0, "brokers": {"1": {"at_ms": T0}}}, "KeyError('phase')"),
    ({"roll_id": "r", "began_ms": T0, "brokers": {"1": {"phase": "rebooted", "at_ms": T0}}}, "unknown roll phase"),
    ({"roll_id": "r", "began_ms": T0, "brokers": {"one": {"phase": "done", "at_ms": T0}}}, "ValueError"),
    ({"roll_id": "r", "began_ms": T0, "brokers": {"1": "done"}}, "TypeError"),
    ({"roll_id": "r", "began_ms": T0, "brokers": {"1": None}}, "TypeError"),
    ({"roll_id": "r", "began_ms": None}, "TypeError"),
])
def test_malformed_records_are_refused_with_the_cause(data: dict, cause: str) -> None:
    with pytest.raises(ValueError, match="roll record is malformed") as err:
        RollRecord.from_dict(data)
    assert cause in str(err.value)
    assert err.value.__cause__ is None and err.value.__suppress_context__


def test_broker_progress_refuses_an_unknown_phase() -> None:
    with pytest.raises(ValueError, match="unknown roll phase 'gone'"):
        BrokerProgress(1, "gone", T0)


# --- decide ----------------------------------------------------------------------------------------


def test_decision_act_property() -> None:
    assert Decision("act", "x").act and not Decision("skip", "x").act and not Decision("fail", "x").act


def test_decide_refuses_an_unknown_step() -> None:
    with pytest.raises(ValueError, match="unknown roll step 'reboot'"):
        decide("reboot", 1, record(), True)


@pytest.mark.parametrize("step", STEPS)
@pytest.mark.parametrize("alive", [True, False])
def test_a_broker_done_in_this_roll_skips_every_step_with_the_reason(step: str, alive: bool) -> None:
    rec = RollRecord("restart", T0, STEPS_3).mark(0, "done", T0, "left alone: running 3.7.1")
    d = decide(step, 0, rec, alive)
    assert d == Decision("skip", f"broker 0: skip {step}: finished in roll 'restart' at 22:13:20 UTC "
                                 "(left alone: running 3.7.1)")


@pytest.mark.parametrize("step", ["gate", "pre_stop", "stop"])
def test_stop_side_acts_on_a_running_untouched_broker(step: str) -> None:
    assert decide(step, 1, record(), True) == Decision("act", f"broker 1: {step}")


@pytest.mark.parametrize("step", ["gate", "pre_stop", "stop"])
def test_stop_side_fails_on_an_untouched_broker_that_is_down(step: str) -> None:
    d = decide(step, 1, record(), False)
    assert d.action == "fail"
    assert d.reason.startswith("broker 1 is down and roll 'restart' did not stop it: a crash or another operation")
    assert "then clear this task" in d.reason


@pytest.mark.parametrize("step", ["gate", "pre_stop", "stop"])
def test_stop_side_acts_again_when_the_stop_was_sent_but_the_broker_still_runs(step: str) -> None:
    d = decide(step, 1, record(b1="stopping"), True)
    assert d == Decision("act", f"broker 1: {step} again: roll 'restart' sent a stop at 22:13:20 UTC but the "
                                "broker still runs")


@pytest.mark.parametrize("step", ["gate", "pre_stop", "stop"])
@pytest.mark.parametrize("phase, alive", [("stopping", False), ("stopped", False), ("stopped", True),
                                          ("prepared", False), ("starting", True), ("starting", False)])
def test_stop_side_skips_a_broker_this_roll_stopped(step: str, phase: str, alive: bool) -> None:
    d = decide(step, 1, record(b1=phase), alive)
    assert d == Decision("skip", f"broker 1: skip {step}: roll 'restart' stopped it at 22:13:20 UTC")


@pytest.mark.parametrize("alive", [True, False])
def test_wait_gone_acts_after_the_stop_was_sent(alive: bool) -> None:
    assert decide("wait_gone", 1, record(b1="stopping"), alive) == Decision(
        "act", "broker 1: waiting until it has left the cluster metadata")


@pytest.mark.parametrize("phase", ["stopped", "prepared", "starting"])
@pytest.mark.parametrize("alive", [True, False])
def test_wait_gone_skips_once_the_roll_saw_it_gone(phase: str, alive: bool) -> None:
    d = decide("wait_gone", 1, record(b1=phase), alive)
    assert d == Decision("skip", "broker 1: skip wait_gone: roll 'restart' saw it gone by 22:13:20 UTC")


def test_before_start_acts_on_a_stopped_broker_that_is_down() -> None:
    assert decide("before_start", 1, record(b1="stopped"), False) == Decision("act", "broker 1: before_start")
    assert decide("before_start", 1, record(b1="stopping"), False).act


@pytest.mark.parametrize("phase", ["stopping", "stopped"])
def test_before_start_fails_when_the_broker_runs_again_unprepared(phase: str) -> None:
    d = decide("before_start", 1, record(b1=phase), True)
    assert d.action == "fail"
    assert d.reason.startswith("broker 1 runs again although roll 'restart' never started it (stopped at "
                               "22:13:20 UTC): someone else started it before its before_start step")


@pytest.mark.parametrize("phase", ["prepared", "starting"])
@pytest.mark.parametrize("alive", [True, False])
def test_before_start_skips_once_prepared(phase: str, alive: bool) -> None:
    assert decide("before_start", 1, record(b1=phase), alive) == Decision(
        "skip", "broker 1: skip before_start: done at 22:13:20 UTC")


@pytest.mark.parametrize("step", ["before_start", "pre_start", "start"])
@pytest.mark.parametrize("alive", [True, False])
def test_start_side_refuses_a_broker_the_roll_never_stopped(step: str, alive: bool) -> None:
    d = decide(step, 1, record(), alive)
    assert d == Decision("fail", f"broker 1: {step} refused: roll 'restart' has not stopped this broker")


@pytest.mark.parametrize("step", ["pre_start", "start"])
@pytest.mark.parametrize("phase", ["stopping", "stopped", "prepared", "starting"])
def test_start_side_acts_while_the_stopped_broker_is_down(step: str, phase: str) -> None:
    assert decide(step, 1, record(b1=phase), False) == Decision("act", f"broker 1: {step}")


@pytest.mark.parametrize("step", ["pre_start", "start"])
@pytest.mark.parametrize("phase", ["stopped", "prepared", "starting"])
def test_start_side_skips_when_the_broker_runs_again(step: str, phase: str) -> None:
    d = decide(step, 1, record(b1=phase), True)
    assert d == Decision("skip", f"broker 1: skip {step}: already running again (roll 'restart': {phase} at "
                                 "22:13:20 UTC)")


def test_one_broker_through_a_whole_roll() -> None:
    """The decisions an uninterrupted roll of broker 0 meets, step by step."""
    rec = record()
    assert decide("gate", 0, rec, True).act and decide("stop", 0, rec, True).act
    rec = rec.mark(0, "stopping", T0)
    assert decide("wait_gone", 0, rec, True).act
    rec = rec.mark(0, "stopped", T0)
    assert not decide("stop", 0, rec, False).act
    assert decide("before_start", 0, rec, False).act
    rec = rec.mark(0, "prepared", T0)
    assert decide("pre_start", 0, rec, False).act and decide("start", 0, rec, False).act
    rec = rec.mark(0, "starting", T0)
    assert decide("start", 0, rec, True).action == "skip"
    rec = rec.mark(0, "done", T0, "restarted")
    assert {decide(s, 0, rec, True).action for s in STEPS} == {"skip"}


# --- turn ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("previous_failed", [False, True])
def test_the_first_broker_acts_at_once(previous_failed: bool) -> None:
    assert turn(0, record(), previous_failed) == Decision("act", "broker 2: its turn (1/3)")


def test_a_broker_acts_once_every_broker_before_it_is_done() -> None:
    assert turn(1, record(b2="done"), False) == Decision("act", "broker 0: its turn (2/3)")
    assert turn(2, record(b2="done", b0="done"), True) == Decision("act", "broker 1: its turn (3/3)")


def test_a_broker_waits_while_the_previous_one_is_not_done() -> None:
    assert turn(1, record(b2="starting"), False) == Decision("skip", "broker 0: waiting for broker 2 to finish")
    assert turn(2, record(b2="done"), False) == Decision("skip", "broker 1: waiting for broker 0 to finish")


def test_a_failed_previous_broker_fails_the_turn_naming_it() -> None:
    d = turn(2, record(b2="done", b0="stopped"), True)
    assert d.action == "fail"
    assert d.reason == ("broker 1 NOT touched: broker 0 (before it in roll 'restart') did not finish; resume by "
                        "clearing the failed tasks")
    # the one named is the last unfinished broker before it (here the first one, 0 being done)
    assert turn(2, record(b0="done"), True).reason.startswith("broker 1 NOT touched: broker 2 (before it")
    assert turn(2, record(), True).reason.startswith("broker 1 NOT touched: broker 0 (before it")


@pytest.mark.parametrize("position", [-1, 3])
def test_turn_refuses_a_position_outside_the_roll(position: int) -> None:
    with pytest.raises(ValueError, match=f"position {position} outside the roll's 3 batches"):
        turn(position, record(), False)


# --- needs-action and eta --------------------------------------------------------------------------


def test_requested_acts_on_every_broker() -> None:
    assert requested(3, {}, {}) == (True, "requested")
    assert requested(0, {"version": "3.7.1"}, {"target_version": "3.7.1"}) == (True, "requested")


def test_eta_is_none_before_a_broker_is_done() -> None:
    assert eta_s(record()) is None
    assert eta_s(record(b2="starting")) is None
    # a broker left alone (took_s 0) gives no time to go by
    assert eta_s(RollRecord("r", T0, STEPS_3).mark(2, "done", T0, "left alone")) is None


def test_left_alone_names_the_nodes_done_without_a_restart_in_the_order_given() -> None:
    rec = (RollRecord("r", T0, STEPS_3).mark(2, "done", T0, "left alone: not in the change's scope [0, 1]")
           .mark(0, "done", T0, "restarted", 12.0).mark(1, "starting", T0))
    assert left_alone(rec, [0, 1, 2]) == [2]
    assert left_alone(rec, [2, 9]) == [2], "a node unknown to the record is not left alone"
    assert left_alone(rec, [0, 1]) == [], "restarted, or not done yet"
    resumed = RollRecord("r", T0, STEPS_3).mark(0, "done", T0, "restarted, back in every ISR; soaking", 8.0)
    assert left_alone(resumed, [0]) == [], "done by an earlier try of the task: restarted, not left alone"
    assert left_alone_mark(rec, [2]) == "left alone"
    assert left_alone_mark(rec, [0, 2]) == "left alone: broker 2"
    assert left_alone_mark(rec, [0, 1], node="controller") is None


def test_eta_is_the_mean_time_per_restart_times_the_brokers_left() -> None:
    rec = RollRecord("restart", T0, STEPS_3).mark(2, "done", T0, "restarted", 100.0)
    assert eta_s(rec) == pytest.approx(200.0)
    rec = rec.mark(0, "done", T0, "restarted", 50.0)
    assert eta_s(rec) == pytest.approx(75.0)
    # a broker left alone counts as done but not in the mean
    rec = rec.mark(1, "done", T0, "left alone")
    assert eta_s(rec) == pytest.approx(0.0)
    # a broker in progress counts as left
    mid = RollRecord("restart", T0, STEPS_3).mark(2, "done", T0, "", 30.0).mark(0, "starting", T0)
    assert eta_s(mid) == pytest.approx(60.0)


# --- batches ---------------------------------------------------------------------------------------

STEPS_BATCHED = tuple(
    {"id": b, "host": f"h{b}", "rack": None, "position": i + 1, "total": 5, "batch": batch}
    for i, (b, batch) in enumerate([(0, 1), (3, 1), (1, 2), (4, 2), (2, 3)])
)


def test_a_serial_roll_has_one_broker_per_batch() -> None:
    assert record().batches == [[2], [0], [1]]


def test_batches_group_the_brokers_that_go_down_together_in_roll_order() -> None:
    rec = RollRecord("restart", T0, STEPS_BATCHED)
    assert rec.batches == [[0, 3], [1, 4], [2]]
    assert rec.order == [0, 3, 1, 4, 2]


def test_a_batch_waits_for_every_broker_of_the_batches_before_it() -> None:
    rec = RollRecord("restart", T0, STEPS_BATCHED)
    assert turn(0, rec, False) == Decision("act", "brokers 0, 3: their turn (1/3)")
    rec = rec.mark(0, "done", T0, "restarted", 40.0)
    assert turn(1, rec, False) == Decision("skip", "brokers 1, 4: waiting for broker 3 to finish")
    assert turn(1, rec, True).action == "fail"
    assert "broker 3 (before it" in turn(1, rec, True).reason
    rec = rec.mark(3, "done", T0, "restarted", 40.0)
    assert turn(1, rec, False).act
    assert turn(2, rec, False) == Decision("skip", "broker 2: waiting for broker 4 to finish")


def test_eta_counts_batches_not_brokers() -> None:
    rec = RollRecord("restart", T0, STEPS_BATCHED).mark(0, "done", T0, "restarted", 40.0)
    assert eta_s(rec) == pytest.approx(120.0)  # the first batch is not done yet: 3 batches of ~40 s left
    rec = rec.mark(3, "done", T0, "restarted", 40.0)
    assert eta_s(rec) == pytest.approx(80.0)


# --- the lag streak carried from one batch to the next gate ----------------------------------------


def test_lag_streak_round_trips_and_counts_only_while_fresh() -> None:
    from kafka_ops.roll import LagStreak

    rec = RollRecord("restart", T0, STEPS_3, lag_ok=LagStreak(2, T0))
    assert RollRecord.from_dict(json.loads(json.dumps(rec.to_dict()))) == rec
    assert RollRecord.from_dict(record().to_dict()).lag_ok is None
    assert LagStreak(2, T0).carried(T0 + 9_000, interval_s=5) == 2  # within two intervals
    assert LagStreak(2, T0).carried(T0 + 11_000, interval_s=5) == 0  # a gap: Burrow was not watched
    assert LagStreak(2, T0).carried(T0 - 1, interval_s=5) == 0  # clock went back: trust nothing


def test_grid_labels_of_batches_and_items_planned_before_them():
    assert grid_label("broker 3", 2, 3) == "broker 3 (2/3)"
    assert grid_label("controller 101", 3, 3, "active", dry_run=True) == "controller 101 (3/3) · active · dry run"
    old = {"batch": 1, "batches": 2, "label": "brokers 0, 3", "brokers": [{"id": 0}, {"id": 3}]}
    assert labelled_batch(old) == {**old, "grid_label": "brokers 0, 3 (1/2)"}
    assert labelled_batch(old, dry_run=True)["grid_label"] == "brokers 0, 3 (1/2) · dry run"
    planned = {**old, "grid_label": "as planned"}
    assert labelled_batch(planned, dry_run=True) == planned
    assert batch_grid_label(old) == "brokers 0, 3 (1/2)"


def test_a_nodes_way_back_is_kept_through_later_phases_survives_json_and_goes_with_a_revert() -> None:
    from kafka_ops.roll import RollRecord
    from kafka_ops.roll_spec import WayBack

    back = WayBack("point /opt/kafka back at kafka_2.13-3.6.2", "ln -sfn kafka_2.13-3.6.2 /opt/kafka.new && mv ...")
    record = RollRecord("binaries", 0, ({"id": 0, "host": "h0"}, {"id": 1, "host": "h1"}))
    record = record.mark(0, "stopping", 1).mark(0, "stopped", 2).mark(0, "prepared", 3, way_back=back.to_dict())
    record = record.mark(0, "starting", 4, "start sent").mark(1, "stopping", 5)
    assert WayBack.from_dict(record.progress(0).way_back) == back, "kept after the phase that set it"
    assert record.progress(1).way_back is None
    again = RollRecord.from_dict(record.to_dict())
    assert again == record and "way_back" not in record.to_dict()["brokers"]["1"]
    reverted = again.reverted(0)
    assert reverted.phase(0) is None and reverted.phase(1) == "stopping", "a reverted node is untouched again"
    with pytest.raises(ValueError, match="way_back needs"):
        RollRecord.from_dict({**record.to_dict(), "brokers": {"0": {"phase": "prepared", "at_ms": 1,
                                                                    "way_back": {"what": "x"}}}})


def test_a_soaking_broker_before_holds_the_next_one_until_the_soak_ends() -> None:
    """``soak_s``: done (never restarted again by a resume) but still soaking: the next broker waits for the soak's
    end, even when the soak's task failed (stopped from outside during the soak)."""
    rec = record().mark(2, "done", T0, "restarted, back in every ISR; soaking", soak_until_ms=T0 + 30_000)
    for failed in (False, True):
        assert turn(1, rec, failed, now_ms=T0 + 1_000) == Decision(
            "skip", "broker 0: waiting for broker 2 to end the soak (until 22:13:50 UTC)")
    assert turn(1, rec, False, now_ms=T0 + 30_000) == Decision("act", "broker 0: its turn (2/3)")
    assert turn(1, rec.mark(2, "done", T0 + 30_000, "restarted"), False, now_ms=T0 + 1_000).action == "act"


# --- summary (the closing note's line per roll) -------------------------------------------------------------


def test_the_summary_says_which_nodes_were_restarted_and_which_left_stopped() -> None:
    assert summary(record(b2="done", b0="stopped")) == \
        "restarted [2] of [2, 0, 1]; left broker 0 stopped at 22:13:20 UTC"
    assert summary(record(b2="done", b0="done", b1="done")) == "restarted [2, 0, 1] of [2, 0, 1]"
    assert summary(record()) == "restarted none of [2, 0, 1]"


def test_the_summary_of_a_roll_that_left_every_node_alone_restarts_none_and_says_why() -> None:
    """An upgrade to the release the cluster runs already: every broker done, none restarted (the note said
    'finished' before, as if the roll had restarted them)."""
    rec = RollRecord("binaries", T0, STEPS_3)
    for b in (2, 0):
        rec = rec.mark(b, "done", T0, "left alone: running 4.1.0 already")
    rec = rec.mark(1, "done", T0, "left alone: not in the change's scope [0, 2]")
    assert summary(rec) == ("restarted none of [2, 0, 1]; left alone [2, 0]: running 4.1.0 already; "
                            "left alone [1]: not in the change's scope [0, 2]")
    assert summary(rec.mark(1, "done", T0, "restarted", 4.0)) == \
        "restarted [1] of [2, 0, 1]; left alone [2, 0]: running 4.1.0 already"


def test_the_summary_of_a_dry_run_restarts_nothing() -> None:
    rec = RollRecord("restart", T0, STEPS_3).mark(2, "done", T0, "dry run").mark(0, "done", T0, "dry run")
    assert summary(rec) == "dry run (nothing restarted) over [2, 0] of [2, 0, 1]"
    ctrl = RollRecord("controllers", T0, ({"id": 100, "host": "c0", "rack": None, "position": 1, "total": 1,
                                           "role": "controller"},)).mark(100, "stopped", T0)
    assert summary(ctrl) == "restarted none of [100]; left controller 100 stopped at 22:13:20 UTC"


def test_an_empty_plan_keeps_why_through_its_json_and_an_old_record_without_it_still_loads() -> None:
    empty = RollRecord("ibp", T0, empty_because="KRaft: metadata.version replaces inter.broker.protocol.version")
    data = json.loads(json.dumps(empty.to_dict()))
    assert RollRecord.from_dict(data) == empty
    del data["empty_because"]
    assert RollRecord.from_dict(data).empty_because is None
    assert "empty_because" not in RollRecord("restart", T0, STEPS_3).to_dict()
