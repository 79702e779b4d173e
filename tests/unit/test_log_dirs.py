"""A config change of the log directories (``kafka_ops.log_dirs``): Kafka's effective list, what moves, and the
refusals: a directory dropped while it holds replicas, a KRaft metadata log moved."""

from __future__ import annotations

from kafka_ops.log_dirs import DEFAULT_LOG_DIR, change, effective, metadata_dir, refusals, replicas_by_dir, split

NOW = {"log.dirs": "/d1", "log.dir": DEFAULT_LOG_DIR, "metadata.log.dir": None}


def test_the_list_is_log_dirs_else_log_dir_else_kafkas_default_each_path_normalised():
    assert split(" /d1/, /d2/./x ,,") == ["/d1", "/d2/x"]
    assert effective({"log.dirs": "/a,/b", "log.dir": "/c"}) == ["/a", "/b"]
    assert effective({"log.dirs": None, "log.dir": "/c"}) == ["/c"]
    assert effective({}) == [DEFAULT_LOG_DIR]
    assert metadata_dir({"log.dirs": "/a,/b"}) == "/a"
    assert metadata_dir({"log.dirs": "/a,/b", "metadata.log.dir": "/m"}) == "/m"


def test_a_change_names_what_it_adds_and_drops_and_none_when_it_touches_no_directory():
    assert change(1, NOW, {"log.retention.ms": "1"}) is None
    moved = change(1, {"log.dirs": "/d1,/d2"}, {"log.dirs": "/d2,/d3"})
    assert moved is not None and moved.added == ["/d3"] and moved.dropped == ["/d1"]
    assert (moved.metadata_before, moved.metadata_after) == ("/d1", "/d2")
    assert moved.moves_data(kraft=False)
    restated = change(1, {"log.dirs": "/d1"}, {"log.dirs": "/d1/"})
    assert restated is not None and not restated.moves_data(kraft=True)
    pinned = change(1, {"log.dirs": "/d1,/d2", "metadata.log.dir": "/d1"}, {"metadata.log.dir": "/d2"})
    assert pinned is not None and pinned.moves_data(kraft=True) and not pinned.moves_data(kraft=False)
    deleted = change(1, NOW, {"log.dirs": None})  # deleted: log.dir's value from then on
    assert deleted is not None and deleted.after == (DEFAULT_LOG_DIR,) and deleted.dropped == ["/d1"]


def test_adding_a_directory_is_no_refusal_in_either_mode():
    moved = change(3, NOW, {"log.dirs": "/d1,/d2"})
    assert moved is not None and moved.added == ["/d2"]
    assert refusals(moved, kraft=True, replicas_in={"/d1": 20}) == []
    assert refusals(moved, kraft=False, replicas_in={"/d1": 20}) == []


def test_dropping_a_directory_that_holds_replicas_is_refused_an_empty_one_is_not():
    moved = change(3, {"log.dirs": "/d1,/d2"}, {"log.dirs": "/d1"})
    assert moved is not None
    assert refusals(moved, kraft=False, replicas_in={"/d1": 20, "/d2": 4}) == [
        "broker 3: the log directory /d2 would be dropped while it holds 4 replicas: Kafka does not move them, they "
        "would be gone from the broker at its restart (fetched again from scratch, offline where it held the only "
        'in-sync copy): move them to its other directories first (kafka-reassign-partitions with "log_dirs", '
        "KIP-113), then drop it"]
    assert refusals(moved, kraft=True, replicas_in={"/d1": 20}) == []


def test_moving_the_kraft_metadata_log_is_refused_in_kraft_mode_only():
    moved = change(3, {"log.dirs": "/d1,/d2"}, {"log.dirs": "/d2,/d1"})
    assert moved is not None and moved.added == [] and moved.dropped == []
    assert refusals(moved, kraft=True, replicas_in={}) == [
        "broker 3: the change moves the KRaft metadata log from /d1 to /d2 (metadata.log.dir, else the first of "
        "log.dirs): the node would start without it; keep /d1 first, or set metadata.log.dir=/d1"]
    assert refusals(moved, kraft=False, replicas_in={}) == []
    pinned = change(3, {"log.dirs": "/d1,/d2", "metadata.log.dir": "/d1"}, {"log.dirs": "/d2,/d1"})
    assert pinned is not None and refusals(pinned, kraft=True, replicas_in={}) == []


def test_replicas_by_dir_counts_one_brokers_replicas_and_skips_directories_in_error():
    rows = [{"broker": 3, "log_dir": "/d1/", "topic": "t", "partition": 0},
            {"broker": 3, "log_dir": "/d1", "topic": "t", "partition": 1},
            {"broker": 4, "log_dir": "/d1", "topic": "t", "partition": 2},
            {"broker": 3, "log_dir": "/d2", "error_code": 57}]
    assert replicas_by_dir(rows, 3) == {"/d1": 2}
    assert replicas_by_dir([*rows, {"broker": 3, "log_dir": "/d3", "topic": "lock", "partition": 0}], 3,
                           exclude_topics={"lock"}) == {"/d1": 2}


def test_the_plan_step_refuses_a_log_directory_change_mid_migration_and_asks_describe_log_dirs_only_to_drop():
    """``ConfigPlanOperator._log_dir_moves`` (the glue): mid-migration refused naming the brokers; adding on KRaft
    returns the directories to format without a DescribeLogDirs; a drop asks it."""
    from types import SimpleNamespace

    import pytest
    from kafka_ops.config_change import DescribedConfig
    from kafka_ops.roll_spec import ClusterMode
    from operators.config_change import ConfigPlanOperator
    from runtime.failures import RunRefused

    asked: list = []
    admin = SimpleNamespace(describe_log_dirs=lambda brokers: asked.append(brokers) or [
        {"broker": 1, "log_dir": "/d2", "topic": "t", "partition": 0}])
    described = {1: {"log.dirs": DescribedConfig("log.dirs", "/d1", True, "STATIC_BROKER_CONFIG")}}
    op = ConfigPlanOperator(task_id="plan_config", settings={"cluster": "kafka_prod"})
    op.ask = lambda call, what: call()
    op._profile = SimpleNamespace(kafka_home_for=lambda b: "/opt/kafka",
                                             server_properties_for=lambda b: "/etc/kafka/server.properties")
    with pytest.raises(RunRefused, match=r"the log directories of brokers \[1\] change while the cluster migrates "
                                         "from ZooKeeper to KRaft"):
        op._log_dir_moves(admin, {"log.dirs": "/d1,/d2"}, [1], described, ClusterMode.MIGRATING)
    assert op._log_dir_moves(admin, {"log.dirs": "/d1,/d2"}, [1], described, ClusterMode.KRAFT) == {1: ["/d2"]}
    assert op._log_dir_moves(admin, {"log.dirs": "/d1,/d2"}, [1], described, ClusterMode.ZOOKEEPER) == {}
    assert asked == [], "adding asks no DescribeLogDirs"
    assert op._log_dir_moves(admin, {"log.retention.ms": "1"}, [1], described, ClusterMode.KRAFT) == {}
    two = {1: {"log.dirs": DescribedConfig("log.dirs", "/d1,/d2", True, "STATIC_BROKER_CONFIG")}}
    with pytest.raises(RunRefused, match="the log directory /d2 would be dropped while it holds 1 replicas"):
        op._log_dir_moves(admin, {"log.dirs": "/d1"}, [1], two, ClusterMode.ZOOKEEPER)
    assert asked == [[1]]
