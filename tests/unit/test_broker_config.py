"""The rules of a broker config change (``kafka_ops.config_change``): Kafka's per-broker / cluster-wide rule,
the thread-pool 2x rule, the ELR min.insync.replicas rules, classification, refusals and the per-broker plan
(dynamic alter vs server.properties + restart, idempotent on a re-run). Pure, no servers."""

from __future__ import annotations

import pytest
from kafka_ops import properties_file
from kafka_ops.config_change import (
    CLUSTER_LEVEL_LISTENER_CONFIGS,
    PER_BROKER_ONLY,
    THREAD_POOL_CONFIGS,
    DescribedConfig,
    broker_plan,
    check_scope,
    classify,
    elr_refusals,
    is_per_broker_only,
    refusals,
    thread_pool_refusal,
    update_mode,
)

STATIC = "STATIC_BROKER_CONFIG"
DEFAULT = "DEFAULT_CONFIG"
DYN_BROKER = "DYNAMIC_BROKER_CONFIG"
DYN_CLUSTER = "DYNAMIC_DEFAULT_BROKER_CONFIG"

SERVER = (
    "# broker 1\n"
    "broker.id=1\n"
    "listeners=PLAINTEXT://127.0.0.11:9092\n"
    "\n"
    "# retention\n"
    "log.retention.hours=168\n"
    "num.io.threads=8\n"
)


def described(**overrides: tuple[str | None, str]) -> dict[str, DescribedConfig]:
    """A broker's DescribeConfigs: name -> DescribedConfig; ``overrides`` (dots as ``__``) = (value, source)."""
    rows = {
        # name: (value, read_only, source, sensitive)
        "broker.id": ("1", True, STATIC, False),
        "listeners": ("PLAINTEXT://127.0.0.11:9092", False, STATIC, False),
        "advertised.listeners": ("PLAINTEXT://127.0.0.11:9092", False, STATIC, False),
        "log.retention.hours": ("168", True, STATIC, False),
        "log.retention.minutes": (None, True, DEFAULT, False),
        "log.retention.ms": (None, False, DEFAULT, False),
        "auto.create.topics.enable": ("true", True, DEFAULT, False),
        "num.io.threads": ("8", False, STATIC, False),
        "num.network.threads": ("3", False, DEFAULT, False),
        "num.replica.fetchers": ("1", False, DEFAULT, False),
        "background.threads": ("10", False, DEFAULT, False),
        "log.cleaner.threads": ("1", False, DEFAULT, False),
        "min.insync.replicas": ("1", False, DEFAULT, False),
        "max.connections": ("2147483647", False, DEFAULT, False),
        "ssl.keystore.location": (None, False, DEFAULT, False),
        "ssl.keystore.password": (None, False, DEFAULT, True),
        "ssl.client.auth": ("none", False, DEFAULT, False),
        "sasl.jaas.config": (None, False, DEFAULT, True),
        "message.max.bytes": ("1048588", False, DEFAULT, False),
    }
    for dotted, (value, source) in overrides.items():
        name = dotted.replace("__", ".")
        _, read_only, _, sensitive = rows[name]
        rows[name] = (value, read_only, source, sensitive)
    return {name: DescribedConfig(name=name, value=v, read_only=ro, source=src, sensitive=sens)
            for name, (v, ro, src, sens) in rows.items()}


# -- Kafka's sets ---------------------------------------------------------------------------------------------


def test_per_broker_only_is_kafkas_per_broker_configs() -> None:
    for key in ("listeners", "advertised.listeners", "listener.security.protocol.map", "ssl.keystore.location",
                "ssl.keystore.certificate.chain", "ssl.client.auth", "sasl.jaas.config",
                "sasl.enabled.mechanisms", "principal.builder.class"):
        assert key in PER_BROKER_ONLY and is_per_broker_only(key), key
    for key in ("max.connections", "max.connection.creation.rate", "num.network.threads", "num.io.threads",
                "log.cleaner.threads", "min.insync.replicas", "message.max.bytes"):
        assert key not in PER_BROKER_ONLY and not is_per_broker_only(key), key
    assert CLUSTER_LEVEL_LISTENER_CONFIGS.isdisjoint(PER_BROKER_ONLY)
    # 37 DynamicListenerConfig keys + 3 SSL-only security keys - 3 cluster-level listener keys
    assert len(PER_BROKER_ONLY) == 37
    # listener-prefixed keys: per broker unless their base is a cluster-level listener config
    assert is_per_broker_only("listener.name.internal.ssl.keystore.location")
    assert is_per_broker_only("listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config")
    assert not is_per_broker_only("listener.name.internal.max.connections")
    assert not is_per_broker_only("listener.name.internal.num.network.threads")


def test_update_mode() -> None:
    assert update_mode("log.retention.hours", read_only=True) == "read-only"
    assert update_mode("ssl.keystore.location", read_only=False) == "per-broker"
    assert update_mode("log.cleaner.threads", read_only=False) == "cluster-wide"


def test_thread_pool_keys_are_the_six_kafka_resizes() -> None:
    assert THREAD_POOL_CONFIGS == {"num.io.threads", "num.network.threads", "num.replica.fetchers",
                                   "num.recovery.threads.per.data.dir", "background.threads", "log.cleaner.threads"}


# -- thread pool 2x rule ----------------------------------------------------------------------------------------


def test_thread_pool_accepts_exactly_half_and_double() -> None:
    assert thread_pool_refusal("num.io.threads", "16", "8") is None
    assert thread_pool_refusal("num.io.threads", "4", "8") is None
    assert thread_pool_refusal("log.cleaner.threads", 2, 1) is None
    assert thread_pool_refusal("num.io.threads", "8", "8") is None  # unchanged
    assert thread_pool_refusal("num.network.threads", "2", "5") is None  # Int division: 5 / 2 = 2


def test_thread_pool_refuses_beyond_double_below_half_and_below_one() -> None:
    more = thread_pool_refusal("num.io.threads", "17", "8")
    assert more is not None and "at most double" in more and "8 * 2 = 16" in more and "16, then 17" in more
    less = thread_pool_refusal("num.io.threads", "3", "8")
    assert less is not None and "at least half" in less and "8 // 2 = 4" in less and "4, then 3" in less
    assert "at least half" in (thread_pool_refusal("num.network.threads", "1", "5") or "")
    zero = thread_pool_refusal("background.threads", "0", "10")
    assert zero is not None and "at least 1" in zero
    assert thread_pool_refusal("listener.name.internal.num.network.threads", "7", "3") is not None


def test_thread_pool_rule_leaves_other_cases_to_kafka() -> None:
    assert thread_pool_refusal("message.max.bytes", "99999999", "1") is None  # not a thread pool
    assert thread_pool_refusal("num.io.threads", "many", "8") is None  # Kafka's validateOnly refuses it
    assert thread_pool_refusal("num.io.threads", None, "8") is None  # a delete
    assert thread_pool_refusal("num.io.threads", "64", None) is None  # current unknown


# -- ELR ----------------------------------------------------------------------------------------------------------


def test_elr_refuses_broker_level_min_isr_and_cluster_level_removal() -> None:
    set_two = {"min.insync.replicas": "2"}
    delete = {"min.insync.replicas": None}
    for changes in (set_two, delete):
        [reason] = elr_refusals(changes, [1], elr_enabled=True)
        assert "Broker-level min.insync.replicas cannot be altered while ELR is enabled" in reason
    [reason] = elr_refusals(delete, "cluster", elr_enabled=True)
    assert "Cluster-level min.insync.replicas cannot be removed while ELR is enabled" in reason
    assert elr_refusals(set_two, "cluster", elr_enabled=True) == []
    assert elr_refusals(set_two, [1], elr_enabled=False) == []
    assert elr_refusals(delete, "cluster", elr_enabled=False) == []
    assert elr_refusals({"log.cleaner.threads": "2"}, [1], elr_enabled=True) == []


# -- classification ---------------------------------------------------------------------------------------------


def test_classify_dynamic_static_unknown_with_did_you_mean() -> None:
    changes = {"log.retention.hours": "72", "log.cleaner.threads": "2", "log.retension.hours": "72",
               "no.such.thing.at.all": "1", "auto.create.topics.enable": "false"}
    result = classify(changes, described())
    assert result.dynamic == ("log.cleaner.threads",)
    assert result.static == ("log.retention.hours", "auto.create.topics.enable")
    assert list(result.unknown) == ["log.retension.hours", "no.such.thing.at.all"]
    assert result.unknown["log.retension.hours"][0] == "log.retention.hours"
    assert result.unknown["no.such.thing.at.all"] == ()


def test_classify_listener_prefixed_keys_by_kafkas_listener_rule() -> None:
    changes = {"listener.name.internal.ssl.keystore.location": "/ks.jks",
               "listener.name.internal.max.connections": "100",
               "listener.name.internal.ssl.client.auth": "required",
               "listener.name.sasl.scram-sha-256.sasl.jaas.config": "x",
               "listener.name.internal.not.a.config": "1"}
    result = classify(changes, described())
    assert result.dynamic == ("listener.name.internal.ssl.keystore.location",
                              "listener.name.internal.max.connections")
    # an existing listener cannot change these without a restart (DynamicListenerConfig)
    assert result.static == ("listener.name.internal.ssl.client.auth",
                             "listener.name.sasl.scram-sha-256.sasl.jaas.config")
    assert list(result.unknown) == ["listener.name.internal.not.a.config"]


# -- refusals -----------------------------------------------------------------------------------------------------


def test_refusals_accept_a_plain_change() -> None:
    by_broker = {1: described(), 2: described()}
    assert refusals({"log.retention.hours": "72", "log.cleaner.threads": "2"}, "cluster", by_broker, False) == []
    assert refusals({"listeners": "PLAINTEXT://127.0.0.11:9094"}, [1], by_broker, False) == []


def test_refusals_unknown_key_with_did_you_mean() -> None:
    [reason] = refusals({"log.retension.hours": "72"}, "cluster", {1: described()}, False)
    assert reason.startswith("log.retension.hours: not a broker config")
    assert "did you mean log.retention.hours" in reason


def test_refusals_per_broker_only_key_with_cluster_scope() -> None:
    by_broker = {1: described(), 2: described()}
    change = {"listener.name.internal.ssl.keystore.location": "/etc/kafka/ks.jks"}
    [reason] = refusals(change, "cluster", by_broker, False)
    assert "per broker only" in reason and "broker ids" in reason
    assert refusals(change, [1, 2], by_broker, False) == []
    # the cluster-level listener keys stay settable cluster-wide
    assert refusals({"listener.name.internal.max.connections": "100"}, "cluster", by_broker, False) == []


def test_refusals_unprefixed_ssl_store_key_changed_dynamically() -> None:
    reasons = refusals({"ssl.keystore.location": "/ks.jks"}, [1], {1: described()}, False)
    assert len(reasons) == 1 and "listener.name.<listener>.ssl.keystore.location" in reasons[0]


def test_refusals_thread_pool_against_each_brokers_current_value() -> None:
    by_broker = {1: described(num__io__threads=("8", STATIC)), 2: described(num__io__threads=("4", STATIC))}
    assert refusals({"num.io.threads": "8"}, "cluster", by_broker, False) == []  # 2x of broker 2's 4
    [reason] = refusals({"num.io.threads": "16"}, "cluster", by_broker, False)
    assert reason.startswith("broker 2: num.io.threads 4 -> 16")
    assert refusals({"num.io.threads": "16"}, [1], by_broker, False) == []  # broker 1 only: 8 -> 16


def test_refusals_elr_through_refusals() -> None:
    by_broker = {1: described()}
    [reason] = refusals({"min.insync.replicas": "2"}, [1], by_broker, elr_enabled=True)
    assert "Broker-level min.insync.replicas cannot be altered" in reason
    assert refusals({"min.insync.replicas": "2"}, "cluster", by_broker, elr_enabled=True) == []


def test_refusals_bad_scope_and_empty_change() -> None:
    by_broker = {1: described(), 2: described()}
    assert refusals({}, "cluster", by_broker, False) == ["no config changes given"]
    assert "not among the described brokers [1, 2]" in refusals({"log.cleaner.threads": "2"}, [3], by_broker,
                                                                 False)[0]
    assert check_scope("all", [1]) and check_scope([], [1]) and check_scope(["1"], [1])
    assert "named twice" in check_scope([1, 1], [1])[0]
    assert check_scope("cluster", []) == [] and check_scope([1], [1, 2]) == []


def test_a_scope_that_reaches_a_broker_that_is_down_is_refused_naming_it() -> None:
    """A stopped broker (in replica lists, not registered) cannot have its file read or edited nor its running config
    compared: a cluster-wide change, or a scope naming it, is refused; a scope of live brokers beside it is not."""
    (reason,) = check_scope("cluster", [0, 1], down=[2])
    assert reason.startswith("brokers [2] are down (in replica lists, not registered): a cluster-wide change would "
                             "leave their server.properties unchanged; start it (them) and trigger again, or name the "
                             "live brokers as the scope")
    (reason,) = check_scope([1, 2], [0, 1], down=[2])
    assert reason.startswith("scope: brokers [2] are down (in replica lists, not registered)"), reason
    assert check_scope([0, 1], [0, 1], down=[2]) == []
    assert check_scope([0, 5], [0, 1], down=[2]) == ["scope: brokers [5] are not among the described brokers [0, 1]"]


# -- broker plan --------------------------------------------------------------------------------------------------


def test_plan_mixed_dynamic_and_static_restarts_for_the_static_key() -> None:
    plan = broker_plan(1, {"log.retention.hours": "72", "log.cleaner.threads": "2"}, SERVER, described())
    assert plan.alter == {"log.cleaner.threads": "2"}
    assert plan.static == {"log.retention.hours": ("168", "72")}
    assert plan.needs_restart
    assert "log.retention.hours 168 -> 72 in server.properties, read-only: restart" in plan.reasons
    assert ("log.cleaner.threads 1 -> 2 dynamically at the cluster-wide default, no restart; "
            "server.properties unset -> 2 to match") in plan.reasons
    assert properties_file.parse(plan.file_text)["log.retention.hours"] == "72"
    assert properties_file.parse(plan.file_text)["log.cleaner.threads"] == "2"
    assert plan.file_text.startswith("# broker 1\nbroker.id=1\n")  # comments and order kept
    assert plan.file_changes == {"log.retention.hours": ("168", "72"), "log.cleaner.threads": (None, "2")}
    assert plan.unchanged == () and not plan.nothing_to_do


def test_plan_rerun_after_success_has_nothing_to_do() -> None:
    changes = {"log.retention.hours": "72", "log.cleaner.threads": "2"}
    first = broker_plan(1, changes, SERVER, described())
    after = described(log__retention__hours=("72", STATIC), log__cleaner__threads=("2", DYN_CLUSTER))
    again = broker_plan(1, changes, first.file_text, after)
    assert again.nothing_to_do and not again.needs_restart
    assert again.alter == {} and again.static == {} and again.file_text == first.file_text
    assert again.unchanged == ("log.retention.hours", "log.cleaner.threads")
    assert "log.retention.hours already 72 in server.properties: nothing to do" in again.reasons
    assert again.pending == ()


def test_plan_rerun_before_the_restart_does_not_restart_but_says_pending() -> None:
    changes = {"log.retention.hours": "72"}
    first = broker_plan(1, changes, SERVER, described())
    again = broker_plan(1, changes, first.file_text, described())  # the broker still reports 168
    assert not again.needs_restart and again.nothing_to_do
    assert again.pending == ("log.retention.hours",)
    assert any(r.startswith("log.retention.hours already 72 in server.properties: nothing to do (the broker "
                            "still runs 168") for r in again.reasons)


def test_plan_dynamic_only_needs_no_restart_and_per_broker_scope_level() -> None:
    plan = broker_plan(1, {"log.cleaner.threads": "2"}, SERVER, described(), scope=[1])
    assert plan.alter == {"log.cleaner.threads": "2"} and not plan.needs_restart
    assert "dynamically at broker 1" in plan.reasons[0]
    # set at the cluster level only: a per-broker change still has to be made
    cluster_level = described(log__cleaner__threads=("2", DYN_CLUSTER))
    assert broker_plan(1, {"log.cleaner.threads": "2"}, plan.file_text, cluster_level, scope=[1]).alter == {
        "log.cleaner.threads": "2"}
    broker_level = described(log__cleaner__threads=("2", DYN_BROKER))
    assert broker_plan(1, {"log.cleaner.threads": "2"}, plan.file_text, broker_level, scope=[1]).nothing_to_do


def test_plan_names_a_broker_override_that_would_shadow_a_cluster_wide_change() -> None:
    plan = broker_plan(1, {"log.cleaner.threads": "2"}, SERVER, described(log__cleaner__threads=("3", DYN_BROKER)))
    assert plan.shadowed == (
        'broker 1: log.cleaner.threads: its own dynamic value 3 (set for broker 1 alone) takes precedence over the '
        'cluster-wide default 2, so the change would not reach it: change it there (scope [1]) or delete it there '
        'first ({"log.cleaner.threads": null} with scope [1])',)
    # the same value set for the broker alone: the change reaches it all the same
    assert broker_plan(1, {"log.cleaner.threads": "2"}, SERVER,
                       described(log__cleaner__threads=("2", DYN_BROKER))).shadowed == ()
    # a broker-scoped change sets that very value; a cluster-wide delete leaves it, which is not shadowing
    assert broker_plan(1, {"log.cleaner.threads": "2"}, SERVER, described(log__cleaner__threads=("3", DYN_BROKER)),
                       scope=[1]).shadowed == ()
    deleted = broker_plan(1, {"log.cleaner.threads": None}, SERVER, described(log__cleaner__threads=("3", DYN_BROKER)))
    assert deleted.shadowed == () and "leaves in place" in deleted.reasons[0]


def test_plan_sensitive_dynamic_value_is_always_altered() -> None:
    key = "listener.name.internal.ssl.keystore.password"
    desc = described()
    desc[key] = DescribedConfig(key, None, False, DYN_BROKER, sensitive=True)
    text = properties_file.edit(SERVER, {key: "s3cret"})
    plan = broker_plan(1, {key: "s3cret"}, text, desc, scope=[1])
    assert plan.alter == {key: "s3cret"} and not plan.needs_restart and plan.file_changes == {}


def test_plan_static_removal_and_absent_static_removal() -> None:
    plan = broker_plan(1, {"log.retention.hours": None}, SERVER, described())
    assert plan.needs_restart and plan.static == {"log.retention.hours": ("168", None)}
    assert "log.retention.hours 168 -> removed from server.properties, read-only: restart" in plan.reasons
    assert "log.retention.hours" not in properties_file.parse(plan.file_text)
    again = broker_plan(1, {"log.retention.hours": None}, plan.file_text,
                        described(log__retention__hours=("168", DEFAULT)))
    assert again.nothing_to_do and again.reasons == ["log.retention.hours not in server.properties: nothing to do"]


def test_plan_dynamic_delete_restarts_only_when_the_file_sets_it() -> None:
    text = properties_file.edit(SERVER, {"log.cleaner.threads": "2"})
    desc = described(log__cleaner__threads=("2", DYN_CLUSTER))
    plan = broker_plan(1, {"log.cleaner.threads": None}, text, desc)
    assert plan.alter == {"log.cleaner.threads": None}
    assert plan.needs_restart  # until it restarts the broker runs the file's 2 it read at start-up
    assert plan.file_text == SERVER
    # without the key in the file: the DELETE alone, no restart
    plain = broker_plan(1, {"log.cleaner.threads": None}, SERVER, desc)
    assert plain.alter == {"log.cleaner.threads": None} and not plain.needs_restart
    # after the delete and the restart: nothing left
    done = broker_plan(1, {"log.cleaner.threads": None}, SERVER, described())
    assert done.nothing_to_do and done.unchanged == ("log.cleaner.threads",)
    # deleted for broker 1 alone while only the cluster-wide default sets it: nothing to delete there, and the
    # reason says the broker keeps the default's value
    scoped = broker_plan(1, {"log.cleaner.threads": None}, SERVER, desc, scope=[1])
    assert scoped.nothing_to_do and scoped.alter == {}
    assert scoped.reasons == [
        "log.cleaner.threads not set dynamically at broker 1 nor in server.properties: nothing to do (broker 1 keeps "
        'the cluster-wide default 2, set for every broker: delete it with scope "cluster" to change that)']


def test_plan_names_a_synonym_that_would_shadow_the_change() -> None:
    text = properties_file.edit(SERVER, {"log.retention.ms": "86400000"})
    plan = broker_plan(1, {"log.retention.hours": "72"}, text, described())
    assert plan.shadowed == (
        "broker 1: log.retention.hours: no effect while log.retention.ms is set in server.properties (it takes "
        "precedence, Kafka's broker config synonyms): change log.retention.ms instead, or delete it in the same "
        'change ({"log.retention.ms": null})',)
    dynamic = broker_plan(1, {"log.retention.hours": "72"}, SERVER,
                          described(log__retention__ms=("86400000", DYN_CLUSTER)))
    assert "log.retention.ms is set dynamically (DYNAMIC_DEFAULT_BROKER_CONFIG)" in dynamic.shadowed[0]
    clear = broker_plan(1, {"log.retention.hours": "72"}, SERVER, described())
    assert clear.shadowed == () and not any("no effect" in r for r in clear.reasons)
    both = broker_plan(1, {"log.retention.hours": "72", "log.retention.ms": None}, text, described())
    assert both.shadowed == () and not any("no effect" in r for r in both.reasons)
    chosen = broker_plan(1, {"log.retention.hours": "72", "log.retention.ms": "3600000"}, text, described())
    assert chosen.shadowed == () and any("this change sets both" in r for r in chosen.reasons), \
        "both set by the same change: the operator chose, a warning"


def test_plan_refuses_unknown_keys() -> None:
    with pytest.raises(ValueError, match="log.retension.hours"):
        broker_plan(1, {"log.retension.hours": "72"}, SERVER, described())


# -- the param, types, passwords --------------------------------------------------------------------------------


def test_parse_changes_keeps_values_as_typed() -> None:
    from kafka_ops.config_change import parse_changes

    assert parse_changes({"queued.max.requests": 400, "auto.create.topics.enable": False, "x.ratio": 0.5,
                          "log.dirs": "/a,/b", "gone": None}) == {
        "queued.max.requests": "400", "auto.create.topics.enable": "false", "x.ratio": "0.5", "log.dirs": "/a,/b",
        "gone": None}
    assert list(parse_changes({"b": "1", "a": "2"})) == ["b", "a"], "the order given is kept"
    with pytest.raises(ValueError, match="changes must be an object"):
        parse_changes(["num.io.threads", 4])
    with pytest.raises(ValueError, match=r"log\.dirs: \['/a'\] is neither.*comma-separated"):
        parse_changes({"log.dirs": ["/a"]})
    with pytest.raises(ValueError, match="'num io threads' is not a config name"):
        parse_changes({"num io threads": 4})


def test_type_refusal_follows_the_type_kafka_reports() -> None:
    from kafka_ops.config_change import type_refusal

    def entry(kind: str) -> DescribedConfig:
        return DescribedConfig("k", "1", True, DEFAULT, type=kind)

    assert type_refusal("k", "maybe", entry("BOOLEAN")) == "k: 'maybe' is not a BOOLEAN (true or false)"
    assert type_refusal("k", " TRUE ", entry("BOOLEAN")) is None
    assert type_refusal("k", "12x", entry("INT")).startswith("k: '12x' is not an INT")
    assert type_refusal("k", "2147483648", entry("INT")) is not None, "beyond 32 bits"
    assert type_refusal("k", "2147483648", entry("LONG")) is None
    assert type_refusal("k", "40000", entry("SHORT")).startswith("k: '40000' is not a SHORT")
    assert type_refusal("k", "abc", entry("LONG")) == "k: 'abc' is not a LONG (a whole number of 64 bits)"
    assert type_refusal("k", "0.8", entry("DOUBLE")) is None and type_refusal("k", "x", entry("DOUBLE")) is not None
    assert type_refusal("k", "anything", entry("STRING")) is None
    assert type_refusal("k", None, entry("INT")) is None, "a delete has no type"
    assert type_refusal("k", "x", DescribedConfig("k", "1", True)) is None, "type not reported: Kafka judges"


def test_refusals_name_wrong_types_and_passwords() -> None:
    desc = described()
    desc["auto.create.topics.enable"] = DescribedConfig("auto.create.topics.enable", "true", True, DEFAULT,
                                                        type="BOOLEAN")
    reasons = refusals({"auto.create.topics.enable": "maybe", "listener.name.internal.ssl.keystore.password": "s3",
                        "ssl.keystore.password": "s3"}, [1], {1: desc}, elr_enabled=False)
    assert "auto.create.topics.enable: 'maybe' is not a BOOLEAN (true or false)" in reasons
    assert sum("a password config: secrets never go in a run's params" in r for r in reasons) == 2, reasons


# -- the roll's rule: the file against the running config -----------------------------------------------------


def test_same_value_compares_as_kafka_parses_the_type() -> None:
    from kafka_ops.config_change import same_value

    assert same_value("400", DescribedConfig("q", "400", True, STATIC, type="INT"))
    assert same_value(" 0400", DescribedConfig("q", "400", True, STATIC, type="INT"))
    assert not same_value("400", DescribedConfig("q", "500", True, DEFAULT, type="INT"))
    assert same_value("TRUE", DescribedConfig("b", "true", True, STATIC, type="BOOLEAN"))
    assert same_value("a, b", DescribedConfig("l", "a,b", True, STATIC, type="LIST"))
    assert not same_value("a, b", DescribedConfig("s", "a,b", True, STATIC, type="STRING"))
    assert same_value(None, DescribedConfig("q", "500", True, DEFAULT)), "absent from the file: the default runs"
    assert not same_value(None, DescribedConfig("q", "400", True, STATIC)), "removed, but read at start-up"


def test_restart_reasons_compare_the_file_not_the_wanted_value() -> None:
    from kafka_ops.config_change import restart_reasons

    desc = described()
    edited = SERVER.replace("log.retention.hours=168", "log.retention.hours=72")
    assert restart_reasons({"log.retention.hours": "72"}, edited, desc) == [
        "log.retention.hours 72 in server.properties, the broker runs 168 (STATIC_BROKER_CONFIG, read-only): restart"]
    after_restart = described(log__retention__hours=("72", STATIC))
    assert restart_reasons({"log.retention.hours": "72"}, edited, after_restart) == [], "restarted on it: done"
    # the file is what counts: a file that still says 168 asks for nothing, whatever the change wants
    assert restart_reasons({"log.retention.hours": "72"}, SERVER, desc) == []
    # a dynamic key set by the change never restarts, even while the file and the broker differ
    assert restart_reasons({"num.io.threads": "16"}, SERVER.replace("=8", "=16"), desc) == []
    # a dynamic key deleted while the file value it falls back to is not what runs: restart
    deleted = described(num__io__threads=("16", STATIC))
    assert restart_reasons({"num.io.threads": None}, SERVER.replace("num.io.threads=8\n", ""), deleted) == [
        "num.io.threads not in server.properties, the broker runs 16 (STATIC_BROKER_CONFIG, its dynamic value "
        "deleted): restart"]
    still_dynamic = described(num__io__threads=("16", DYN_CLUSTER))
    assert restart_reasons({"num.io.threads": None}, SERVER, still_dynamic) == []


def test_needs_restart_leaves_brokers_outside_the_scope_alone() -> None:
    from kafka_ops.config_change import needs_restart

    edited = SERVER.replace("log.retention.hours=168", "log.retention.hours=72")
    facts = {"file_text": edited, "described": described()}
    act, why = needs_restart(1, facts, {"changes": {"log.retention.hours": 72}, "scope": [1, 2]})
    assert act and why.startswith("log.retention.hours 72 in server.properties, the broker runs 168")
    assert needs_restart(0, facts, {"changes": {"log.retention.hours": 72}, "scope": [1, 2]}) == (
        False, "not in the change's scope [1, 2]")
    done = {"file_text": edited, "described": described(log__retention__hours=("72", STATIC))}
    assert needs_restart(1, done, {"changes": {"log.retention.hours": 72}, "scope": "cluster"}) == (
        False, "server.properties and the running config agree on log.retention.hours")


def test_store_location_is_always_sent_for_certificate_rotation() -> None:
    key = "listener.name.internal.ssl.keystore.location"
    desc = described()
    desc[key] = DescribedConfig(key, "/etc/kafka/ks.p12", False, DYN_BROKER)
    plan = broker_plan(1, {key: "/etc/kafka/ks.p12"}, SERVER + f"{key}=/etc/kafka/ks.p12\n", desc, scope=[1])
    assert plan.alter == {key: "/etc/kafka/ks.p12"} and not plan.needs_restart and not plan.file_changes


# -- what is sent, and when it counts as applied --------------------------------------------------------------


def test_alter_requests_one_default_for_the_cluster_or_one_per_broker() -> None:
    from kafka_ops.config_change import alter_requests

    alters = {0: {"num.io.threads": "16"}, 1: {"num.io.threads": "16", "log.cleaner.threads": None}, 2: {}}
    assert alter_requests("cluster", alters) == [(None, {"num.io.threads": "16", "log.cleaner.threads": None})]
    assert alter_requests([0, 1, 2], alters) == [(0, {"num.io.threads": "16"}),
                                                 (1, {"num.io.threads": "16", "log.cleaner.threads": None})]
    assert alter_requests("cluster", {0: {}, 1: {}}) == [], "nothing to send on a re-run"


def test_not_applied_names_the_brokers_behind_until_they_report_the_level() -> None:
    from kafka_ops.config_change import not_applied

    sent = {1: {"num.io.threads": "16"}, 2: {"num.io.threads": "16"}}
    before = {1: described(), 2: described()}
    assert not_applied("cluster", sent, before) == ["broker 1 reports num.io.threads=8 (STATIC_BROKER_CONFIG)",
                                                    "broker 2 reports num.io.threads=8 (STATIC_BROKER_CONFIG)"]
    after = {1: described(num__io__threads=("16", DYN_CLUSTER)), 2: described(num__io__threads=("16", DYN_CLUSTER))}
    assert not_applied("cluster", sent, after) == []
    assert not_applied([1, 2], sent, after) != [], "per broker: the default level does not count"
    shadowed = {1: after[1], 2: described(num__io__threads=("4", DYN_BROKER))}
    assert not_applied("cluster", sent, shadowed) == [], "a broker's own value shadows the default: not waited for"
    deleted = {1: {"num.io.threads": None}}
    assert not_applied([1], deleted, {1: described(num__io__threads=("16", DYN_BROKER))}) == [
        "broker 1 reports num.io.threads=16 (DYNAMIC_BROKER_CONFIG)"]
    assert not_applied([1], deleted, {1: described()}) == []
    assert not_applied([1], {1: {"listener.name.internal.max.connections": "10"}}, {1: described()}) == [], \
        "a listener-prefixed key is not described: Kafka accepted it"


def test_plan_summary_is_the_dry_runs_diff_line() -> None:
    edited = broker_plan(1, {"num.io.threads": "16", "log.retention.hours": "72", "auto.create.topics.enable": None},
                         SERVER, described(), scope=[1])
    assert edited.summary() == ("broker 1: dynamic num.io.threads -> 16; server.properties log.retention.hours 168 "
                                "-> 72; unchanged auto.create.topics.enable; restart: yes")


def test_refusals_a_nodes_identity_whatever_the_scope() -> None:
    by_broker = {1: described(), 2: described()}
    for scope in ("cluster", [1]):
        [reason] = refusals({"broker.id": "5"}, scope, by_broker, False)
        assert reason.startswith("broker.id: not changed by a config change")
        assert "meta.properties" in reason and "kafka_scale_out" in reason
    # beside an allowed change, only the identity key is named
    [reason] = refusals({"broker.id": "5", "log.retention.hours": "72"}, "cluster", by_broker, False)
    assert reason.startswith("broker.id:")
    known = {b: {**d, "controller.quorum.voters": DescribedConfig("controller.quorum.voters", "100@h:9093", True,
                                                                  STATIC, False)} for b, d in by_broker.items()}
    [reason] = refusals({"controller.quorum.voters": "100@other:9093"}, "cluster", known, False)
    assert "KIP-853" in reason and "every node" in reason
