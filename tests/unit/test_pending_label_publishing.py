"""runtime.pending_labels: what a plan publishes and what the scheduler-side policy takes from it (the
policy against Airflow's own expansion code: tests/dags/test_pending_labels.py)."""

from __future__ import annotations

from types import SimpleNamespace

from runtime.pending_labels import GRID_LABELS_KEY, label_for, label_new_instance, publish


class FakeTI:
    def __init__(self) -> None:
        self.pushed: list[tuple[str, object]] = []

    def xcom_push(self, key: str, value: object) -> None:
        self.pushed.append((key, value))


def test_publish_pushes_the_items_labels_for_one_mapped_task_cut_to_airflows_limit():
    ti = FakeTI()
    items = [{"id": 3, "grid_label": "broker 3 (1/2)"}, {"id": 1, "grid_label": "x" * 300}]
    assert publish({"ti": ti}, "restart.broker", items) is items
    assert ti.pushed == [(GRID_LABELS_KEY, {"restart.broker": ["broker 3 (1/2)", "x" * 250]})]
    # nothing to publish: no task instance (no error), no mapped task named, no items
    assert publish({}, "restart.broker", items) is items
    assert publish({"ti": ti}, None, items) is items and publish({"ti": ti}, "restart.broker", []) == []
    assert len(ti.pushed) == 1


def test_label_for_picks_the_task_and_index_or_nothing():
    published = {"restart.broker": ["broker 3 (1/2)", "broker 1 (2/2)"]}
    assert label_for(published, "restart.broker", 1) == "broker 1 (2/2)"
    assert label_for(published, "restart.broker", 2) is None
    assert label_for(published, "restart.broker", -1) is None
    assert label_for(published, "controllers.controller", 0) is None
    assert label_for(["broker 3"], "restart.broker", 0) is None
    assert label_for({"restart.broker": [None, ""]}, "restart.broker", 0) is None
    assert label_for({"restart.broker": ["", "b"]}, "restart.broker", 0) is None


def test_the_policy_leaves_alone_what_it_must_not_touch_without_a_query():
    run = SimpleNamespace(id=1)  # not bound to a session: a query would fail (and be swallowed)
    unmapped = SimpleNamespace(task_id="check_and_lock", map_index=-1, _rendered_map_index=None)
    labelled = SimpleNamespace(task_id="restart.broker", map_index=0, _rendered_map_index="broker 3 (1/2) · gate")
    for ti in (unmapped, labelled):
        label_new_instance(ti, run)
        label_new_instance(ti, None)
    assert unmapped._rendered_map_index is None
    assert labelled._rendered_map_index == "broker 3 (1/2) · gate", "a running task's label is never overwritten"
    orphan = SimpleNamespace(task_id="restart.broker", map_index=0, _rendered_map_index=None)
    label_new_instance(orphan, run)  # a run without a session: no label, no error
    assert orphan._rendered_map_index is None
