"""``kafka_ops.command_output.failure_text``: what an error quotes of a failed command's output."""

from __future__ import annotations

from kafka_ops.command_output import failure_text

STORAGE_TOOL = """Exception in thread "main" java.lang.RuntimeException: Invalid cluster.id in: /data/meta.properties. \
Expected i4_ygKk5RTezpIDi7n1o1A, but read OldClusterAAAAAAAAAAAAA
\tat org.apache.kafka.metadata.properties.MetaPropertiesEnsemble.verify(MetaPropertiesEnsemble.java:503)
\tat org.apache.kafka.metadata.storage.Formatter.doFormat(Formatter.java:399)
\tat kafka.tools.StorageTool.main(StorageTool.scala)
Caused by: java.io.IOException: disk gone
\tat java.base/java.io.FileInputStream.open0(Native Method)
\t... 12 more
"""


def test_a_java_tools_failure_is_quoted_by_its_messages_not_its_stack_frames():
    text = failure_text(STORAGE_TOOL, "formatting...")
    assert text == ('Exception in thread "main" java.lang.RuntimeException: Invalid cluster.id in: '
                    "/data/meta.properties. Expected i4_ygKk5RTezpIDi7n1o1A, but read OldClusterAAAAAAAAAAAAA "
                    "Caused by: java.io.IOException: disk gone")


def test_plain_output_is_kept_and_cut_to_its_last_characters():
    assert failure_text("", "kafka-service: broker 3 did not stop\n") == "kafka-service: broker 3 did not stop"
    assert failure_text("  \n", "a\nb") == "a b", "stderr blank: stdout"
    assert failure_text("x" * 600 + "END", "", limit=10) == "xxxxxxxEND"
    assert failure_text("", "") == ""
