"""``kafka_ops.properties_file``: ``server.properties`` parsed and edited over ``javaproperties``, keeping comments
and order, with the escaping ``java.util.Properties.load`` reads back (expected lines written by hand from the
``Properties.store`` Javadoc). Pure, no servers."""

from __future__ import annotations

import pytest
from kafka_ops import properties_file as pf

SERVER = (
    "# Licensed to the Apache Software Foundation\n"
    "\n"
    "############################# Server Basics #############################\n"
    "broker.id=1\n"
    "  listeners = PLAINTEXT://127.0.0.11:9092\n"
    "! bang comment\n"
    "log.dirs: /data/kafka\n"
    "num.io.threads 8\n"
    "log.retention.hours=168\n"
    "ssl.cipher.suites=A,\\\n"
    "    B,\\\n"
    "    C\n"
    "# log.retention.hours=1\n"
    "log.retention.hours=72\n"
)


def test_parse_reads_server_properties() -> None:
    parsed = pf.parse(SERVER)
    assert parsed["listeners"] == "PLAINTEXT://127.0.0.11:9092"  # leading whitespace, " = "
    assert parsed["log.dirs"] == "/data/kafka"  # ": "
    assert parsed["num.io.threads"] == "8"  # whitespace separator
    assert parsed["ssl.cipher.suites"] == "A,B,C"  # continuation lines, their indentation dropped
    assert parsed["log.retention.hours"] == "72"  # the last occurrence wins
    assert list(parsed) == ["broker.id", "listeners", "log.dirs", "num.io.threads", "log.retention.hours",
                            "ssl.cipher.suites"]


def test_malformed_unicode_escape_is_refused() -> None:
    for text in ("a=\\u12\n", "a=\\uZZZZ\n"):
        with pytest.raises(ValueError):
            pf.parse(text)
        with pytest.raises(ValueError):
            pf.edit(text, {"b": "1"})


def test_the_documented_difference_from_current_jdks() -> None:
    # JDK 17+ reads "#x=1" as a comment here; javaproperties (like JDK 11) reads a key "#x" (module docstring)
    assert pf.parse("\\\n#x=1\nb=2\n") == {"#x": "1", "b": "2"}


def test_edit_sets_in_place_keeping_comments_and_order() -> None:
    edited = pf.edit(SERVER, {"listeners": "PLAINTEXT://127.0.0.11:9094", "log.dirs": "/data/k2",
                              "num.io.threads": "16"})
    # the changed lines are rewritten as key=value (escaped as Properties.store does); all others stay
    assert edited == (SERVER.replace("  listeners = PLAINTEXT://127.0.0.11:9092",
                                     "listeners=PLAINTEXT\\://127.0.0.11\\:9094")
                      .replace("log.dirs: /data/kafka", "log.dirs=/data/k2")
                      .replace("num.io.threads 8", "num.io.threads=16"))
    assert pf.diff(SERVER, edited) == {"listeners": ("PLAINTEXT://127.0.0.11:9092", "PLAINTEXT://127.0.0.11:9094"),
                                       "log.dirs": ("/data/kafka", "/data/k2"), "num.io.threads": ("8", "16")}


def test_edit_of_a_repeated_key_rewrites_the_first_line_and_drops_the_others() -> None:
    edited = pf.edit(SERVER, {"log.retention.hours": "24"})
    assert edited == SERVER.replace("log.retention.hours=168\n", "log.retention.hours=24\n").replace(
        "# log.retention.hours=1\nlog.retention.hours=72\n", "# log.retention.hours=1\n")
    assert pf.diff(SERVER, edited) == {"log.retention.hours": ("72", "24")}


def test_edit_replaces_a_continued_entry_by_one_line() -> None:
    edited = pf.edit(SERVER, {"ssl.cipher.suites": "X,Y"})
    assert "log.retention.hours=168\nssl.cipher.suites=X,Y\n# log.retention.hours=1\n" in edited
    assert "    B,\\\n" not in edited
    assert pf.parse(edited)["ssl.cipher.suites"] == "X,Y"


def test_edit_appends_new_keys_in_order_and_removes_with_none() -> None:
    edited = pf.edit(SERVER, {"z.new": "1", "broker.id": None, "a.new": " spaced", "log.retention.hours": None})
    assert "broker.id" not in edited
    assert "\nlog.retention.hours=" not in edited  # every occurrence goes
    assert "# log.retention.hours=1\n" in edited  # comments stay
    assert edited.endswith("# log.retention.hours=1\nz.new=1\na.new=\\ spaced\n")
    assert pf.diff(SERVER, edited) == {"broker.id": ("1", None), "log.retention.hours": ("72", None),
                                       "z.new": (None, "1"), "a.new": (None, " spaced")}


def test_edit_with_nothing_to_change_keeps_the_text_byte_identical() -> None:
    same = {"listeners": "PLAINTEXT://127.0.0.11:9092", "log.retention.hours": "72", "absent": None}
    assert pf.edit(SERVER, same) == SERVER
    assert pf.edit("a=1\r\n", {"a": "1"}) == "a=1\r\n"


def test_edit_line_ends_and_an_open_last_line() -> None:
    # rewritten and appended lines end in "\n", unchanged ones keep theirs
    assert pf.edit("a=1\r\nb=2\r\n", {"b": "3", "c": "4"}) == "a=1\r\nb=3\nc=4\n"
    assert pf.edit("a=1", {"b": "2"}) == "a=1\nb=2\n"
    assert pf.edit("", {"b": "2"}) == "b=2\n"
    # a last line continued into the end of the text would swallow an appended line: it is closed first
    for text in ("a=1\\", "a=1\\\n"):
        assert pf.parse(pf.edit(text, {"b": "2"})) == {"a": "1", "b": "2"}


def test_edit_refuses_an_empty_key() -> None:
    with pytest.raises(ValueError, match="empty"):
        pf.edit(SERVER, {"": "x"})


@pytest.mark.parametrize("value, line", [
    (" C:\\x", "k=\\ C\\:\\\\x"),  # leading space, ":" and backslash escaped
    ("x y ", "k=x y "),  # inner and trailing spaces are not
    ("=x#!", "k=\\=x\\#\\!"),
    ("tab\there\nnl", "k=tab\\there\\nnl"),
    ("\u00e9\U0001F600", "k=\\u00e9\\ud83d\\ude00"),  # non-ASCII -> \uXXXX, beyond the BMP a surrogate pair
])
def test_edit_writes_the_documented_escapes(value: str, line: str) -> None:
    assert pf.edit("", {"k": value}) == line + "\n"


VALUES = ["", "plain", " leading space", "  two leading", "trailing ", "C:\\kafka\\data\\", "back\\slash",
          "=starts with equals", ":starts with colon", "a=b:c#d!e", "#hash first", "!bang first",
          "tab\there", "new\nline", "cr\rhere", "form\ffeed", "\u00e9t\u00e9 \u00fcber", "\u20ac 100",
          "emoji \U0001F600", "bell\x07", "\\u0041 literally", "PLAINTEXT://h:9092,SSL://h:9093"]
KEYS = ["a", "with space", "a=b", "a:b", "#hash", "!bang", "back\\slash", " lead", "\u00e9", "tab\tkey"]


def test_edit_round_trips_tricky_values_and_keys_as_ascii() -> None:
    changes = {f"k{i}": v for i, v in enumerate(VALUES)}
    changes |= {key: "v" for key in KEYS}
    changes["listeners"] = "=odd value"  # an existing line written with " = "
    edited = pf.edit(SERVER, changes)
    assert edited.isascii()
    parsed = pf.parse(edited)
    for key, value in changes.items():
        assert parsed[key] == value, key
    assert pf.diff(SERVER, edited) == {key: (pf.parse(SERVER).get(key), value) for key, value in changes.items()}


def test_diff_ignores_comments_spacing_and_shadowed_lines() -> None:
    reformatted = "# new comment\nbroker.id = 1\nlog.retention.hours=1\nlog.retention.hours : 72\n"
    assert pf.diff("broker.id=1\nlog.retention.hours=72\n", reformatted) == {}
    assert pf.diff("a=1\nb=2\n", "b=3\nc=4\n") == {"a": ("1", None), "b": ("2", "3"), "c": (None, "4")}
