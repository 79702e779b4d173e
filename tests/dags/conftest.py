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
