"""ClusterProfile parsing, validation (named fields), redaction, and client config translation."""

import pytest
from kafka_ops.profile import (
    DEFAULT_SERVICE_START,
    DEFAULT_SERVICE_STATUS,
    DEFAULT_SERVICE_STOP,
    ClusterProfile,
    normalize_bootstrap_servers,
    redact,
    to_kafka_python_config,
)

FULL_EXTRA = {
    "security.protocol": "SASL_SSL",
    "sasl.mechanism": "SCRAM-SHA-512",
    "sasl.username": "ops",
    "sasl.password": "hunter2",
    "ssl.ca.location": "/etc/kafka/ca.pem",
    "ssh_conn_id": "kafka_ssh",
    "zookeeper": "zk1:2181,zk2:2181/kafka",
    "burrow_conn_id": "burrow",
    "burrow_cluster": "prod-eu",
    "consumer_groups": ["billing", "search"],
    "service_stop": "sudo systemctl stop confluent-kafka",
    "server_properties": "/etc/kafka/server.properties",
    "kafka_home": "/opt/kafka",
}


def test_full_profile():
    prof = ClusterProfile.from_connection_fields("kafka_prod_eu", "b1:9092, b2:9093", FULL_EXTRA)
    assert prof.cluster == "kafka_prod_eu"
    assert prof.bootstrap_servers == "b1:9092,b2:9093"
    assert dict(prof.client_config) == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "ops",
        "sasl.password": "hunter2",
        "ssl.ca.location": "/etc/kafka/ca.pem",
    }
    assert prof.ssh_conn_id == "kafka_ssh"
    assert prof.zookeeper == "zk1:2181,zk2:2181/kafka"
    assert (prof.burrow_conn_id, prof.burrow_cluster) == ("burrow", "prod-eu")
    assert prof.consumer_groups == ("billing", "search")
    assert prof.service_stop == "sudo systemctl stop confluent-kafka"
    assert prof.service_start == DEFAULT_SERVICE_START
    assert prof.server_properties == "/etc/kafka/server.properties"
    assert prof.kafka_home == "/opt/kafka"
    assert dict(prof.commands) == {} and prof.allow_adhoc_commands is False


def test_minimal_profile_defaults():
    prof = ClusterProfile.from_connection_fields("kafka_sandbox", "127.0.0.11", None, port=9092)
    assert prof.bootstrap_servers == "127.0.0.11:9092"
    assert dict(prof.client_config) == {}
    assert prof.ssh_conn_id is None and prof.zookeeper is None and prof.burrow_conn_id is None
    assert prof.consumer_groups == ()
    assert (prof.service_stop, prof.service_start, prof.service_status) == (
        "sudo systemctl stop kafka",
        "sudo systemctl start kafka",
        "sudo systemctl is-active kafka",
    )
    assert DEFAULT_SERVICE_STOP == "sudo systemctl stop kafka"
    assert DEFAULT_SERVICE_STATUS == "sudo systemctl is-active kafka"


def test_confluent_config_includes_bootstrap_and_overrides():
    prof = ClusterProfile.from_connection_fields("c", "b1:9092", {"security.protocol": "SSL"})
    conf = prof.confluent_config(**{"socket.timeout.ms": 5000})
    assert conf == {"bootstrap.servers": "b1:9092", "security.protocol": "SSL", "socket.timeout.ms": 5000}


def test_nested_client_dict_and_other_dotted_settings():
    prof = ClusterProfile.from_connection_fields(
        "c", "b1", {"client": {"ssl.ca.location": "/ca"}, "client.id": "kafka-ops", "socket.timeout.ms": 3000}
    )
    assert dict(prof.client_config) == {
        "ssl.ca.location": "/ca", "client.id": "kafka-ops", "socket.timeout.ms": 3000
    }


def test_login_password_become_sasl_credentials_unless_set_in_extra():
    prof = ClusterProfile.from_connection_fields("c", "b1", {}, login="u", password="p")
    assert prof.client_config["sasl.username"] == "u"
    assert prof.client_config["sasl.password"] == "p"
    prof = ClusterProfile.from_connection_fields("c", "b1", {"sasl.username": "x"}, login="u")
    assert prof.client_config["sasl.username"] == "x"


def test_bootstrap_from_extra_when_host_empty():
    prof = ClusterProfile.from_connection_fields("c", "", {"bootstrap.servers": "b1:9092,b2:9092"})
    assert prof.bootstrap_servers == "b1:9092,b2:9092"
    assert "bootstrap.servers" not in prof.client_config
    same = ClusterProfile.from_connection_fields("c", "b1,b2", {"bootstrap.servers": "b1:9092,b2:9092"})
    assert same.bootstrap_servers == "b1:9092,b2:9092"


@pytest.mark.parametrize(
    "host, extra, message",
    [
        ("", {}, "connection 'kafka_x': field 'host' must hold the bootstrap servers"),
        (None, {}, "field 'host' must hold the bootstrap servers"),
        ("b1", {"bootstrap.servers": "b9:9092"}, "'host' and extra 'bootstrap.servers' disagree"),
        ("b1:99999", {}, "bootstrap server 'b1:99999' is not host\\[:port\\]"),
        ("b1 b2", {}, "bootstrap server 'b1 b2' is not host"),
        ("b1", {"consumer_group": ["x"]}, "unknown field\\(s\\) \\['consumer_group'\\]"),
        ("b1", {"consumer_groups": "billing"}, "field 'consumer_groups': 'billing' is not of type 'array'"),
        ("b1", {"consumer_groups": ["a", "a"]}, "field 'consumer_groups'"),
        ("b1", {"consumer_groups": [""]}, "field 'consumer_groups/0'"),
        ("b1", {"ssh_conn_id": 5}, "field 'ssh_conn_id': 5 is not of type 'string'"),
        ("b1", {"service_stop": "   "}, "field 'service_stop'"),
        ("b1", {"burrow_conn_id": "burrow"}, "burrow_cluster.*burrow_conn_id and burrow_cluster go together"),
        ("b1", {"burrow_cluster": "x"}, "burrow_conn_id and burrow_cluster go together"),
        ("b1", {"security.protocol": ["SSL"]}, "field 'security.protocol'"),
        ("b1", {"client": {"Bad Key": 1}}, "field 'client'"),
        ("b1", {"client": {"ssl.ca.location": "/a"}, "ssl.ca.location": "/b"}, "given both at top level"),
        ("b1", {"commands": ["drain-lb"]}, "field 'commands': \\['drain-lb'\\] is not of type 'object'"),
        ("b1", {"commands": {"drain lb": "x"}}, "field 'commands'"),
        ("b1", {"commands": {"-x": "x"}}, "field 'commands'"),
        ("b1", {"commands": {"x" * 65: "x"}}, "field 'commands'"),
        ("b1", {"commands": {"drain": "  "}}, "field 'commands/drain'"),
        ("b1", {"commands": {"drain": 5}}, "field 'commands/drain': 5 is not of type 'string'"),
        ("b1", {"allow_adhoc_commands": "true"}, "field 'allow_adhoc_commands': 'true' is not of type 'boolean'"),
        ("b1", {"command": {}}, "unknown field\\(s\\) \\['command'\\]"),
    ],
)
def test_invalid_profiles_name_the_field(host, extra, message):
    with pytest.raises(ValueError, match=message):
        ClusterProfile.from_connection_fields("kafka_x", host, extra)


def test_secret_values_are_not_echoed_in_errors():
    with pytest.raises(ValueError) as err:
        ClusterProfile.from_connection_fields("c", "b1", {"sasl.password": ["s3cr3t"]})
    assert "s3cr3t" not in str(err.value)
    assert "sasl.password" in str(err.value)


def test_repr_redacts_secrets():
    prof = ClusterProfile.from_connection_fields("kafka_prod_eu", "b1", FULL_EXTRA)
    text = repr(prof)
    assert "hunter2" not in text and "hunter2" not in str(prof)
    assert "'sasl.password': '***'" in text
    assert "'sasl.username': 'ops'" in text
    assert prof.redacted()["client_config"]["sasl.password"] == "***"
    # the real value stays available to the client
    assert prof.confluent_config()["sasl.password"] == "hunter2"


def test_redact_patterns():
    out = redact(
        {
            "ssl.key.password": "a",
            "ssl.keystore.password": "b",
            "sasl.oauthbearer.client.secret": "c",
            "ssl.key.pem": "d",
            "sasl.jaas.config": "e",
            "ssl.ca.location": "/ca",
        }
    )
    assert out == {
        "ssl.key.password": "***",
        "ssl.keystore.password": "***",
        "sasl.oauthbearer.client.secret": "***",
        "ssl.key.pem": "***",
        "sasl.jaas.config": "***",
        "ssl.ca.location": "/ca",
    }


def test_require_names_missing_fields():
    prof = ClusterProfile.from_connection_fields("kafka_sandbox", "b1", {"ssh_conn_id": "s"})
    prof.require("ssh_conn_id")
    with pytest.raises(ValueError, match=r"connection 'kafka_sandbox': profile field\(s\) \['zookeeper'\]"):
        prof.require("ssh_conn_id", "zookeeper")


def test_profile_is_immutable():
    prof = ClusterProfile.from_connection_fields("c", "b1", {"security.protocol": "SSL", "commands": {"a": "b"}})
    with pytest.raises(AttributeError):
        prof.ssh_conn_id = "x"
    with pytest.raises(TypeError):
        prof.client_config["security.protocol"] = "PLAINTEXT"
    with pytest.raises(TypeError):
        prof.commands["a"] = "rm -rf /"


def test_normalize_bootstrap_servers():
    assert normalize_bootstrap_servers("PLAINTEXT://b1:9093, b2,,") == "b1:9093,b2:9092"
    assert normalize_bootstrap_servers("b1", default_port=19092) == "b1:19092"
    assert normalize_bootstrap_servers("[::1]:9092") == "[::1]:9092"
    with pytest.raises(ValueError, match="no bootstrap servers"):
        normalize_bootstrap_servers(" , ")


def test_kafka_python_translation():
    conf = to_kafka_python_config(
        "b1:9092,b2:9092",
        {
            "security.protocol": "sasl_ssl",
            "sasl.mechanisms": "PLAIN",
            "sasl.username": "u",
            "sasl.password": "p",
            "ssl.ca.location": "/ca",
            "ssl.endpoint.identification.algorithm": "none",
            "client.id": "ops",
            "socket.timeout.ms": 1000,
        },
    )
    assert conf == {
        "bootstrap_servers": ["b1:9092", "b2:9092"],
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": "u",
        "sasl_plain_password": "p",
        "ssl_cafile": "/ca",
        "ssl_check_hostname": False,
        "client_id": "ops",
    }


def test_kafka_python_translation_refuses_unmappable_security_settings():
    with pytest.raises(ValueError, match=r"\['ssl.keystore.location'\] have no kafka-python equivalent"):
        to_kafka_python_config("b1:9092", {"ssl.keystore.location": "/ks.p12"})


def test_kafka_python_config_from_profile():
    prof = ClusterProfile.from_connection_fields("c", "b1", {})
    assert prof.kafka_python_config() == {"bootstrap_servers": ["b1:9092"]}


def test_controller_client_replaces_the_security_settings_for_a_controller_listener_only():
    extra = {**FULL_EXTRA, "client.id": "kafka-ops",
             "controller_client": {"security.protocol": "SSL", "ssl.ca.location": "/etc/kafka/controller-ca.pem"}}
    prof = ClusterProfile.from_connection_fields("c", "b1:9094", extra)
    assert prof.kafka_python_config(controller=True) == {
        "bootstrap_servers": ["b1:9094"], "client_id": "kafka-ops", "security_protocol": "SSL",
        "ssl_cafile": "/etc/kafka/controller-ca.pem"}, "no SASL credentials of the client listener carried over"
    assert prof.kafka_python_config()["security_protocol"] == "SASL_SSL", "brokers: the client settings"
    assert prof.kafka_python_config()["sasl_plain_password"] == "hunter2"
    unset = ClusterProfile.from_connection_fields("c", "b1:9094", FULL_EXTRA)
    assert unset.controller_client is None
    assert unset.kafka_python_config(controller=True) == unset.kafka_python_config(), "unset: the same listener"
    plain = ClusterProfile.from_connection_fields("c", "b1", {"controller_client": {"security.protocol": "PLAINTEXT"}})
    assert plain.kafka_python_config(controller=True)["security_protocol"] == "PLAINTEXT"


def test_controller_client_takes_only_security_settings_and_hides_its_secrets():
    secret = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "ctl",
              "sasl.password": "s3cret"}
    prof = ClusterProfile.from_connection_fields("c", "b1", {"controller_client": secret})
    assert prof.redacted()["controller_client"]["sasl.password"] == "***" and "s3cret" not in repr(prof)
    with pytest.raises(ValueError, match="controller_client"):
        ClusterProfile.from_connection_fields("c", "b1", {"controller_client": {"client.id": "x"}})
    with pytest.raises(ValueError) as refused:
        ClusterProfile.from_connection_fields("c", "b1", {"controller_client": {"sasl.password": ["s3cret"]}})
    assert "s3cret" not in str(refused.value)


def test_broker_placeholders_are_filled():
    prof = ClusterProfile.from_connection_fields(
        "kafka_sandbox",
        "127.0.0.11:9092",
        {
            "server_properties": "/tmp/sbx/hosts/{broker_id}/server.properties",
            "kafka_home": "/tmp/sbx/hosts/{broker_id}/kafka",
            "service_stop": "kafka-service stop",
            "service_start": "KAFKA_ID={broker_id} ${HOME}/bin/start",
        },
    )
    assert prof.server_properties_for(2) == "/tmp/sbx/hosts/2/server.properties"
    assert prof.kafka_home_for(0) == "/tmp/sbx/hosts/0/kafka"
    assert prof.service_command("stop", 1) == "kafka-service stop"
    assert prof.service_command("start", 3) == "KAFKA_ID=3 ${HOME}/bin/start"
    assert prof.service_command("status", 3) == "sudo systemctl is-active kafka"
    with pytest.raises(ValueError, match="unknown service action 'restart'"):
        prof.service_command("restart", 1)


def test_fixed_paths_and_unset_paths():
    prof = ClusterProfile.from_connection_fields("c", "b1", {"server_properties": "/etc/kafka/server.properties"})
    assert prof.server_properties_for(5) == "/etc/kafka/server.properties"
    assert prof.kafka_home_for(5) is None


def test_sandbox_connection_shape_is_accepted():
    """The sandbox writes host = bootstrap servers and repeats them in extra 'bootstrap.servers'."""
    servers = "127.0.0.11:9092,127.0.0.12:9092,127.0.0.13:9092"
    extra = {
        "bootstrap.servers": servers,
        "ssh_conn_id": "sandbox_ssh",
        "zookeeper": "127.0.0.1:2181",
        "burrow_conn_id": "sandbox_burrow",
        "burrow_cluster": "sandbox",
        "consumer_groups": ["orders-service", "analytics", "auditor"],
        "service_stop": "kafka-service stop",
        "service_start": "kafka-service start",
        "service_status": "kafka-service status",
        "server_properties": "/w/hosts/{broker_id}/server.properties",
        "kafka_home": "/w/hosts/{broker_id}/kafka",
        "commands": {"show-broker": "echo \"broker $KAFKA_BROKER_ID on $(hostname): $(kafka-service status)\""},
    }
    prof = ClusterProfile.from_connection_fields("kafka_sandbox", servers, extra)
    assert prof.command("show-broker", "pre_stop", 1)[1] == "profile command 'show-broker'"
    assert prof.bootstrap_servers == servers
    assert dict(prof.client_config) == {}
    assert prof.confluent_config() == {"bootstrap.servers": servers}


# --- named commands ---------------------------------------------------------------------------------

COMMANDS = {"drain-lb": "lb-ctl drain kafka-{broker_id}", "show_broker.v2": "echo $KAFKA_BROKER_ID"}


def commands_profile(**extra):
    base = {"service_stop": "kafka-service stop {broker_id}", "service_start": "kafka-service start",
            "commands": COMMANDS}
    return ClusterProfile.from_connection_fields("kafka_prod", "b1", {**base, **extra})


def test_commands_and_allow_adhoc_are_read_from_extra():
    prof = commands_profile(allow_adhoc_commands=True)
    assert dict(prof.commands) == COMMANDS and prof.allow_adhoc_commands is True
    assert prof.redacted()["commands"] == COMMANDS and prof.redacted()["allow_adhoc_commands"] is True
    assert "'drain-lb': 'lb-ctl drain kafka-{broker_id}'" in repr(prof)


@pytest.mark.parametrize("choice", [None, "", "   "])
def test_no_choice_means_the_service_command_for_stop_and_start(choice):
    prof = commands_profile()
    assert prof.command(choice, "stop", 3) == ("kafka-service stop 3", "service command (service_stop)")
    assert prof.command(choice, "start", 3) == ("kafka-service start", "service command (service_start)")


@pytest.mark.parametrize("step", ["pre_stop", "pre_start"])
@pytest.mark.parametrize("choice", [None, "", "   "])
def test_no_choice_means_nothing_to_run_for_the_pre_steps(step, choice):
    assert commands_profile().command(choice, step, 3) is None


def test_default_service_commands_when_the_profile_sets_none():
    prof = ClusterProfile.from_connection_fields("c", "b1", {})
    assert prof.command(None, "stop", 1) == (DEFAULT_SERVICE_STOP, "service command (service_stop)")
    assert prof.command(None, "start", 1) == (DEFAULT_SERVICE_START, "service command (service_start)")


@pytest.mark.parametrize("step", ["pre_stop", "stop", "pre_start", "start"])
def test_a_named_command_with_the_broker_id_filled(step):
    prof = commands_profile()
    assert prof.command("drain-lb", step, 7) == ("lb-ctl drain kafka-7", "profile command 'drain-lb'")
    # shell variables stay for the shell
    assert prof.command("show_broker.v2", step, 7) == ("echo $KAFKA_BROKER_ID", "profile command 'show_broker.v2'")


@pytest.mark.parametrize("choice", ["rm -rf /data", "drain", "Drain-LB", " drain-lb"])
def test_adhoc_shell_text_is_refused_naming_the_named_commands(choice):
    with pytest.raises(ValueError) as err:
        commands_profile().command(choice, "pre_stop", 1)
    message = str(err.value)
    assert message.startswith(f"pre_stop {choice!r} is not a command named in connection 'kafka_prod' "
                              "(named commands: ['drain-lb', 'show_broker.v2'])")
    assert "allow_adhoc_commands: true" in message


def test_adhoc_refusal_without_a_connection_or_commands():
    prof = ClusterProfile(cluster="", bootstrap_servers="b1:9092")
    with pytest.raises(ValueError, match=r"stop 'halt' is not a command named in the cluster profile "
                                         r"\(named commands: \[\]\)"):
        prof.command("halt", "stop", 1)


def test_adhoc_shell_text_where_the_profile_allows_it():
    prof = commands_profile(allow_adhoc_commands=True)
    assert prof.command("touch /tmp/{broker_id}.done ${HOME}", "pre_start", 2) == (
        "touch /tmp/2.done ${HOME}", "ad-hoc command (allow_adhoc_commands)")
    # a named command still wins over ad-hoc text
    assert prof.command("drain-lb", "pre_start", 2)[1] == "profile command 'drain-lb'"


def test_broker_hosts_map_ids_to_hosts_and_refuse_bad_ids():
    p = ClusterProfile.from_connection_fields("c", "b1:9092", {"broker_hosts": {"3": "kafka-3", "10": "kafka-10"}})
    assert dict(p.broker_hosts) == {3: "kafka-3", 10: "kafka-10"}
    assert p.redacted()["broker_hosts"] == {"3": "kafka-3", "10": "kafka-10"}
    assert dict(ClusterProfile.from_connection_fields("c", "b1:9092", {}).broker_hosts) == {}
    for bad in ({"x": "h"}, {"-1": "h"}, {"3": ""}, {"3": 4}):
        with pytest.raises(ValueError, match="broker_hosts"):
            ClusterProfile.from_connection_fields("c", "b1:9092", {"broker_hosts": bad})


@pytest.mark.parametrize("extra, lock_in", [
    ({"zookeeper": "zk:2181/kafka"}, "zookeeper"),  # auto: ZooKeeper-mode cluster
    ({}, "kafka"),  # auto: a KRaft cluster has no ZooKeeper: the lock topic
    ({"zookeeper": "zk:2181/kafka", "lock_store": "kafka"}, "kafka"),
    ({"zookeeper": "zk:2181/kafka", "lock_store": "zookeeper"}, "zookeeper"),
])
def test_lock_store_resolves_where_the_lock_lives(extra, lock_in):
    profile = ClusterProfile.from_connection_fields("c", "b:9092", extra)
    assert profile.lock_in == lock_in
    assert profile.redacted()["lock_store"] == extra.get("lock_store", "auto")


def test_lock_store_refuses_a_zookeeper_lock_without_zookeeper_and_unknown_stores():
    with pytest.raises(ValueError, match="connection 'c': lock_store 'zookeeper' needs 'zookeeper'"):
        ClusterProfile.from_connection_fields("c", "b:9092", {"lock_store": "zookeeper"})
    with pytest.raises(ValueError, match="lock_store"):
        ClusterProfile.from_connection_fields("c", "b:9092", {"lock_store": "etcd"})
    with pytest.raises(ValueError, match="connection 'c': reassignment_via 'zookeeper' needs 'zookeeper'"):
        ClusterProfile.from_connection_fields("c", "b:9092", {"reassignment_via": "zookeeper"})


def test_controller_hosts_and_service_commands_are_optional_profile_fields():
    extra = {"controller_hosts": {"100": "ctrl-100.example.com", "101": "ctrl-101.example.com"},
             "controller_service_stop": "sudo systemctl stop kafka-controller-{broker_id}",
             "controller_service_status": "sudo systemctl is-active kafka-controller"}
    p = ClusterProfile.from_connection_fields("c", "b1:9092", {"service_start": "svc start", **extra})
    assert dict(p.controller_hosts) == {100: "ctrl-100.example.com", 101: "ctrl-101.example.com"}
    assert p.controller_service_command("stop", 101) == ("sudo systemctl stop kafka-controller-101",
                                                         "controller service command (controller_service_stop)")
    assert p.controller_service_command("start", 101) == (
        "svc start", "service command (service_start; no controller_service_start)")
    assert p.controller_service_command("status", 100)[0] == "sudo systemctl is-active kafka-controller"
    red = p.redacted()
    assert red["controller_hosts"] == {"100": "ctrl-100.example.com", "101": "ctrl-101.example.com"}
    assert red["controller_service_start"] is None
    with pytest.raises(ValueError, match="unknown service action 'restart'"):
        p.controller_service_command("restart", 100)


def test_without_controller_fields_controllers_use_the_broker_service_commands():
    p = ClusterProfile.from_connection_fields("c", "b1:9092", {})
    assert dict(p.controller_hosts) == {}
    assert p.controller_service_command("stop", 100)[0] == DEFAULT_SERVICE_STOP
    assert p.controller_service_command("status", 100)[0] == DEFAULT_SERVICE_STATUS


@pytest.mark.parametrize("extra", [
    {"controller_hosts": {"x": "h"}}, {"controller_hosts": {"100": ""}}, {"controller_hosts": ["h"]},
    {"controller_service_stop": ""}, {"controller_service_start": "   "}, {"controller_service_status": 3},
])
def test_bad_controller_fields_are_refused_by_name(extra):
    with pytest.raises(ValueError, match=next(iter(extra))):
        ClusterProfile.from_connection_fields("c", "b1:9092", extra)
