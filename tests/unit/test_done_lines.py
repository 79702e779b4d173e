"""The closing note's lines about what a run's acting steps did (``kafka_ops.done_lines``) and how ``run_outcome``
gathers them (``runtime.run_report.done_lines``): only from steps that succeeded, from their own return values."""

from __future__ import annotations

from types import SimpleNamespace

from kafka_ops.done_lines import (
    LINE_LIMIT,
    config_line,
    controllers_line,
    metadata_version_line,
    service_line,
    upgrade_start_line,
)
from runtime import run_report


def stopped(**over):
    return {"action": "stop", "brokers": [3], "acted": [3], "unregistered": [], "formatted": [], "asked": True,
            **over}


def test_service_lines_name_what_this_run_stopped_or_started_and_what_it_found_done():
    assert service_line(stopped(), dry_run=False) == "brokers stopped: [3]"
    assert service_line(stopped(brokers=[3, 5], acted=[3], unregistered=[3, 5]), dry_run=False) == \
        "brokers stopped: [3]; unregistered (KRaft): [3, 5]; stopped already: [5]"
    assert service_line(stopped(action="start", brokers=[4, 6], acted=[6, 4], formatted=[4]), dry_run=False) == \
        "brokers started: [4, 6]; storage formatted: [4]"
    assert service_line(stopped(action="start", brokers=[4], acted=[]), dry_run=False) == \
        "brokers started: none; registered already: [4]"
    assert service_line(stopped(acted=[3], unregistered=[3]), dry_run=True) == \
        "brokers (dry run: nothing ran): would stop [3], would unregister [3]"
    assert service_line(stopped(acted=[], asked=False), dry_run=False) == \
        "brokers [3] drained, not stopped (stop_brokers is false): left as they are"
    assert service_line(stopped(action="start", acted=[], asked=False), dry_run=False) is None, \
        "a scale-out whose brokers were started beforehand has nothing to say"
    assert service_line([3], dry_run=False) is None, "an older step's list: no line rather than a wrong one"


def test_config_lines_give_keys_values_targets_and_files():
    applied = {"changes": {"log.retention.ms": "3600000", "log.cleaner.threads": None, "num.io.threads": "16"},
               "altered": {"cluster": ["log.cleaner.threads", "log.retention.ms"]},
               "files": {"2": "/k/server.properties.bak", "0": "/k/server.properties.bak"}}
    assert config_line(applied, dry_run=False) == (
        "config: changed live at the cluster-wide default: log.cleaner.threads removed, log.retention.ms=3600000; "
        "server.properties written on brokers [0, 2] (each previous file kept beside it)")
    per_broker = {"changes": {"num.io.threads": "16"}, "altered": {"2": ["num.io.threads"], "1": ["num.io.threads"]},
                  "files": {}}
    assert config_line(per_broker, dry_run=False) == \
        "config: changed live at broker 1: num.io.threads=16; changed live at broker 2: num.io.threads=16"
    dry = {"changes": {"queued.max.requests": "1000"}, "altered": {}, "files": {}, "would_alter": {},
           "would_write": [1, 0]}
    assert config_line(dry, dry_run=True) == \
        "config (dry run: nothing changed): would write server.properties on brokers [0, 1]"
    assert config_line({"changes": {"a": "1"}, "altered": {}, "files": {}}, dry_run=False) == \
        "config: nothing changed (every broker in scope has the values already)"
    many = {"changes": {f"key.{i}": "x" * 40 for i in range(20)}, "altered": {"cluster": [f"key.{i}" for i in
                                                                                        range(20)]}, "files": {}}
    assert len(config_line(many, dry_run=False)) == LINE_LIMIT and config_line(many, False).endswith("...")
    assert config_line(None, dry_run=False) is None
    dirs = {"changes": {"log.dirs": "/d1,/d2"}, "altered": {}, "files": {"3": "/k/server.properties.bak"},
            "formatted": [3]}
    assert config_line(dirs, dry_run=False) == (
        "config: server.properties written on brokers [3] (each previous file kept beside it); formatted the new log "
        "directories of brokers [3]")
    assert config_line({**dirs, "would_write": [3], "would_format": [3]}, dry_run=True) == (
        "config (dry run: nothing changed): would write server.properties on brokers [3]; would format the new log "
        "directories of brokers [3]")


def test_metadata_version_lines_name_the_levels_and_the_features_raised():
    bumped = {"action": "bumped", "from": 25, "to": 27, "features": {"group.version": [0, 1]}}
    assert metadata_version_line(bumped, dry_run=False) == \
        "metadata.version 4.0-IV3 (25) -> 4.1-IV1 (27) finalized (UpdateFeatures); group.version 0 -> 1"
    assert metadata_version_line({**bumped, "action": "already", "from": 27}, dry_run=False) == \
        "metadata.version 4.1-IV1 (27) already (nothing sent)"
    assert metadata_version_line({**bumped, "action": "dry run"}, dry_run=True) == \
        "metadata.version (dry run: nothing sent): would finalize 4.0-IV3 (25) -> 4.1-IV1 (27); group.version 0 -> 1"
    assert metadata_version_line({"action": "skipped"}, dry_run=False) is None


def test_controller_lines_name_the_controllers_provisioned_or_deprovisioned():
    assert controllers_line({"provisioned": {"101": "started", "100": "wrote ...; started"}}, dry_run=False) == \
        "KRaft controllers provisioned and started: [100, 101]"
    assert controllers_line({"provisioned": {}}, dry_run=False) == \
        "KRaft controllers provisioned: none (every controller answered already)"
    assert controllers_line({"provisioned": {"100": "dry run"}}, dry_run=True) == \
        "KRaft controllers (dry run: nothing ran): would provision and start [100]"
    assert controllers_line({"deprovisioned": {"100": "stopped; removed ..."}}, dry_run=False) == \
        "KRaft controllers stopped and deprovisioned: [100]"
    assert controllers_line({"other": 1}, dry_run=False) is None


def test_the_upgrade_line_gives_the_target_and_what_each_node_ran_at_the_start():
    zookeeper = {"mode": "zookeeper", "target": "3.7.1", "metadata_version": None,
                 "nodes": {"0": {"installed": "3.6.2", "ibp": "3.6"}, "2": {"installed": "3.6.2", "ibp": "3.6"},
                           "1": {"installed": "3.7.1", "ibp": "3.6"}}}
    assert upgrade_start_line(zookeeper, dry_run=False) == (
        "upgrade to Kafka 3.7.1; found: 3.6.2 on brokers [0, 2], 3.7.1 on brokers [1] "
        "(inter.broker.protocol.version 3.6)")
    kraft = {"mode": "kraft", "target": "4.1.0", "metadata_version": {"current": 25, "target": 27, "features": {}},
             "nodes": {"0": {"installed": "4.0.0", "ibp": None, "role": "broker"},
                       "100": {"installed": "4.0.0", "ibp": None, "role": "controller"}}}
    assert upgrade_start_line(kraft, dry_run=True) == (
        "upgrade to Kafka 4.1.0 (dry run: nothing changed); found: 4.0.0 on brokers [0], 4.0.0 on controllers "
        "[100]; metadata.version 4.0-IV3 (25) -> 4.1-IV1 (27) asked")
    assert upgrade_start_line({"mode": "kraft", "nodes": {}}, dry_run=False) is None, "an older step's value"


class Step:
    def __init__(self, line):
        self.line = line

    def note_line(self, result, dry_run):
        if self.line == "boom":
            raise KeyError("older shape")
        return f"{self.line}: {result} {'dry' if dry_run else 'real'}"


def test_the_report_asks_only_the_steps_that_succeeded_in_order_and_skips_what_it_cannot_read():
    values = {"stop_brokers": {"v": 1}, "apply_config": {"v": 2}, "odd": {"v": 3}}
    ti = SimpleNamespace(xcom_pull=lambda task_ids, key, map_indexes: values[task_ids])
    steps = {"stop_brokers": Step("stop"), "apply_config": Step("config"), "odd": Step("boom")}
    dag = SimpleNamespace(get_task=lambda task_id: steps[task_id])
    crumbs = [{"task_id": "apply_config", "map_index": -1, "state": "success"},
              {"task_id": "stop_brokers", "map_index": -1, "state": "success"},
              {"task_id": "odd", "map_index": -1, "state": "success"},
              {"task_id": "gone", "map_index": -1, "state": "success"}]
    context = {"ti": ti, "dag": dag}
    assert run_report.done_lines(context, crumbs, ["stop_brokers", "apply_config", "odd", "gone"], False) == \
        ["stop: {'v': 1} real", "config: {'v': 2} real"]
    crumbs[1]["state"] = "failed"
    assert run_report.done_lines(context, crumbs, ["stop_brokers", "apply_config"], True) == \
        ["config: {'v': 2} dry"], "a failed step's failure is in the note already; a half-done step gets no line"
    assert run_report.done_lines(context, None, ["apply_config"], False) == []
