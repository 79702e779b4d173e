"""A failed command's output as the one line an error message quotes.

Kafka's tools (``kafka-storage``, ``kafka-server-start``, ...) fail with a Java exception: its message on one line,
then one line per stack frame (``\tat org.apache.kafka...``). An error that quotes the output's last characters
quotes frames and loses the message ("Invalid cluster.id in: /data/meta.properties. Expected abc, but read xyz").
Pure.
"""

from __future__ import annotations

import re

#: A JVM stack trace's frame or elision line (``java.lang.Throwable.printStackTrace``'s format).
_FRAME = re.compile(r"^\s*(at \S+\(.*\)|\.\.\. \d+ more)\s*$")


def failure_text(err: str, out: str, limit: int = 500) -> str:
    """``err`` (else ``out``, when ``err`` is blank) without stack-trace frames, its lines joined by spaces, cut to
    its last ``limit`` characters: ``'Exception in thread "main" java.lang.RuntimeException: Invalid cluster.id in:
    /data/meta.properties. Expected i4_y..., but read OldC...'``. Output without frames is kept as it is (its
    lines joined); empty output gives ``""``."""
    text = err if err.strip() else out
    lines = [line.strip() for line in text.splitlines() if line.strip() and not _FRAME.match(line)]
    joined = " ".join(lines)
    return joined[-limit:] if len(joined) > limit else joined
