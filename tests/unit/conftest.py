"""Fixtures shared by unit tests: a Burrow that does not answer, and BurrowHook classes pointed at a local URL."""

from __future__ import annotations

import socket

import pytest


@pytest.fixture
def silent_url():
    """``http://127.0.0.1:<port>`` of a socket that accepts connections (the kernel's backlog) and never answers, as
    a frozen (SIGSTOP) Burrow does."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    try:
        yield f"http://127.0.0.1:{silent.getsockname()[1]}"
    finally:
        silent.close()


@pytest.fixture
def burrow_at():
    """``burrow_at(url)``: a ``BurrowHook`` class whose ``from_profile`` asks ``url`` (for the profile's
    ``burrow_cluster``) instead of reading an Airflow connection."""
    from hooks.burrow import BurrowHook

    def make(url: str) -> type[BurrowHook]:
        class LocalBurrow(BurrowHook):
            @classmethod
            def from_profile(cls, profile, **kwargs):
                return cls(base_url=url, cluster=profile.burrow_cluster, **kwargs)

        return LocalBurrow

    return make
