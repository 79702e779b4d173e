"""Clients a task keeps open through a block of its work instead of opening one per check: within
:func:`kept_open`, :func:`client` opens a client once per key and hands the same one to every later call; the block's
end closes them all. Outside a block, every :func:`client` call opens and closes its own, as before.

Why: a node roll asks the same services before each of its actions, four to five times a batch: the cluster's lock
store (``runtime.lock_holding``) and ZooKeeper, whether it answers before a stop and a start
(``runtime.start_dependencies``). On a loaded 2-core sandbox an opening (a ZooKeeper session: a TCP connection, the
session handshake, kazoo's threads) took 0.1-0.8 s of the batch's critical path, the read itself a few ms. Each call
still asks afresh (a read, never a cached answer); a call whose body raises closes that client, and the next call
opens a new one (a session lost, a client broken).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from typing import Any

#: The clients kept open in this process: key -> (its closer, the client).
_KEPT: dict[Hashable, tuple[ExitStack, Any]] = {}
#: How many :func:`kept_open` blocks are open in this process (the clients are closed when the outermost one ends).
_KEEPING = [0]


@contextmanager
def kept_open() -> Iterator[None]:
    """Within this block, :func:`client` keeps what it opens until the block ends. Nested blocks keep until the
    outermost one ends."""
    _KEEPING[0] += 1
    try:
        yield
    finally:
        _KEEPING[0] -= 1
        if not _KEEPING[0]:
            for closer, _ in list(_KEPT.values()):
                _close_quietly(closer)
            _KEPT.clear()


@contextmanager
def client(key: Hashable, opener: Callable[[], AbstractContextManager[Any]]) -> Iterator[Any]:
    """The client for ``key``: ``opener()`` entered (a context manager yielding an open client); within
    :func:`kept_open`, the one kept for ``key`` (opened by this call when there is none). An exception raised in the
    ``with`` body closes a kept client (the next call opens a new one) and comes through.

    :raises: what ``opener`` raises when it opens the client.
    """
    if not _KEEPING[0]:
        with opener() as opened:
            yield opened
        return
    entry = _KEPT.get(key)
    if entry is None:
        closer = ExitStack()
        try:
            entry = (closer, closer.enter_context(opener()))
        except BaseException:
            _close_quietly(closer)
            raise
        _KEPT[key] = entry
    try:
        yield entry[1]
    except BaseException:
        if _KEPT.get(key) is entry:
            del _KEPT[key]
        _close_quietly(entry[0])
        raise


def _close_quietly(closer: ExitStack) -> None:
    try:
        closer.close()
    except Exception:  # noqa: BLE001, S110 - a client that cannot be closed is dropped all the same
        pass
