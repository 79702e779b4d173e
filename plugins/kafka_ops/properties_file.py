"""``server.properties`` text read and edited with the ``javaproperties`` package, keeping comments, blank lines,
key order and the lines of keys that are not changed byte for byte.

Kafka reads ``server.properties`` with ``Utils.loadProps``: ``java.util.Properties.load(InputStream)``, so as
ISO 8859-1; a key repeated further down replaces the earlier one (``Hashtable.put``): the last occurrence is the
effective one. :func:`parse` is ``javaproperties.loads`` (same syntax, same last-wins rule); :func:`edit` is
``javaproperties.PropertiesFile``, which:

* rewrites a set key's **first** line as ``key=value`` (indentation, separator style and continuation lines of
  that entry are not kept) and removes its later occurrences, so the file keeps one line per key, in place;
* removes every line of every occurrence of a deleted key;
* appends a new key at the end (closing a last line left open by a trailing backslash first);
* escapes what it writes as ``Properties.store`` does (``join_key_value``): backslash, ``\\t \\n \\r \\f``,
  ``=``, ``:``, ``#``, ``!`` and a leading space backslash-escaped (so ``listeners=PLAINTEXT\\://h\\:9092``,
  which ``Properties.load`` reads as ``PLAINTEXT://h:9092``), and with ``ensure_ascii`` (its default) every
  other character below U+0020 or above U+007E as ``\\uXXXX`` (a character beyond the BMP as a surrogate
  pair): what it writes is ASCII, read the same as ISO 8859-1 or UTF-8. Lines it does not change are kept as
  they are, non-ASCII included;
* ends the lines it writes with ``\\n`` even in a ``\\r\\n`` file (mixed line ends, which ``Properties.load``
  reads all the same).

Known difference: a line holding only ``\\`` followed by a ``#`` line is a continuation of nothing then a
comment for JDK 17's ``Properties.load`` (its ``LineReader``'s ``len == 0`` check), but a key ``#...`` for JDK 11's
and for ``javaproperties``.

Pure: text in, text or dicts out. :mod:`kafka_ops.upgrade`'s ``read_properties`` / ``set_property`` are older
and separate.
"""

from __future__ import annotations

from collections.abc import Mapping

import javaproperties


def parse(text: str) -> dict[str, str]:
    """``server.properties`` text -> {key: value}, unescaped, in order of first appearance; for a repeated key
    the value of its last occurrence (what ``Properties.load`` keeps).

    :raises ValueError: a malformed ``\\uXXXX`` escape (``javaproperties.InvalidUEscapeError``).
    """
    return dict(javaproperties.loads(text))


def edit(text: str, changes: Mapping[str, str | None]) -> str:
    """``text`` with ``changes`` applied: ``{key: new value}`` sets, ``{key: None}`` removes; every other line
    (comments, blank lines, other keys, their order and spacing) is kept as it is (module docstring for what
    ``PropertiesFile`` does to the changed lines). A key whose effective value is already the new one, or an
    absent key set to None, is left alone: when nothing changes the text stays byte-identical.

    :raises ValueError: an empty key; a malformed ``\\uXXXX`` escape in ``text``.
    """
    if any(not key for key in changes):
        raise ValueError("a properties key cannot be empty")
    props = javaproperties.PropertiesFile.loads(text)
    changed = False
    for key, value in changes.items():
        if value is None:
            if key in props:
                del props[key]
                changed = True
        elif props.get(key) != value:
            props[key] = value
            changed = True
    return props.dumps(ensure_ascii=True) if changed else text


def diff(old_text: str, new_text: str) -> dict[str, tuple[str | None, str | None]]:
    """The effective values that differ between two properties texts: ``{key: (old value or None when absent,
    new value or None when absent)}``, keys in ``old_text`` order, then the keys only ``new_text`` has. Comments,
    spacing and repeated-but-shadowed lines do not count (it compares :func:`parse` results).

    :raises ValueError: a malformed ``\\uXXXX`` escape in either text.
    """
    old, new = parse(old_text), parse(new_text)
    changed: dict[str, tuple[str | None, str | None]] = {}
    for key in [*old, *(k for k in new if k not in old)]:
        before, after = old.get(key), new.get(key)
        if before != after:
            changed[key] = (before, after)
    return changed
