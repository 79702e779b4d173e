"""Fixtures for DAG runs against sandbox clusters (see airflow_env.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import airflow_env
import pytest

airflow_env.configure_environment()


@pytest.fixture(scope="session")
def airflow_db() -> None:
    airflow_env.migrate_db()


@pytest.fixture
def use_sandbox(monkeypatch: pytest.MonkeyPatch, airflow_db: None) -> Iterator[Callable[[Path], None]]:
    """``use_sandbox(workdir)`` points the Airflow connections at that sandbox for this test."""

    def point(workdir: Path) -> None:
        for name, value in airflow_env.connection_env(Path(workdir)).items():
            monkeypatch.setenv(name, value)

    yield point


@pytest.fixture
def kraft(fresh_sandbox, use_sandbox):
    """A KRaft sandbox of this test (3 controllers, 3 brokers, Kafka 4.0.0), healthy, with the Airflow
    connections pointed at it; the Kafka connection goes through the brokers' SASL_SSL listener (SCRAM-SHA-256 over
    TLS, the credential in the metadata log, the sandbox's own CA; the controllers' listener stays PLAINTEXT: the
    profile's ``controller_client`` says so)."""
    sandbox = fresh_sandbox(mode="kraft", controllers=3, client_sasl=True, client_tls=True,
                            sasl_mechanism="SCRAM-SHA-256")
    use_sandbox(sandbox.workdir)
    sandbox.wait_healthy(timeout_s=120)
    return sandbox
