"""The demo's Airflow metadata database (``demo.airflow_db``): a real PostgreSQL server from Debian's package, one per
Airflow home, created on the first start, kept across stops, deleted by ``remove``; ``airflow_proc.stop`` stops it
with the Airflow it serves."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
import sqlalchemy

from demo import airflow_db, airflow_proc
from demo.errors import DemoError


@pytest.fixture
def home(tmp_path: Path):
    home = tmp_path / "airflow"
    home.mkdir(mode=0o700)  # private, as pytest's and mkdtemp's directories are: the server must not need to enter it
    yield home
    airflow_db.remove(home)
    assert not airflow_db.data_dir(home).exists()


def _scalar(url: str, sql: str):
    engine = sqlalchemy.create_engine(url)
    try:
        with engine.begin() as conn:
            result = conn.execute(sqlalchemy.text(sql))
            return result.scalar() if result.returns_rows else None
    finally:
        engine.dispose()


def test_a_started_database_keeps_its_rows_across_a_stop_and_start(home: Path) -> None:
    url = airflow_db.start(home)
    assert url == airflow_db.url(home) and url.startswith("postgresql+psycopg2://")
    assert airflow_db.running(home)
    data = airflow_db.data_dir(home)
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    assert not [p for p in home.iterdir()], "nothing of the server's in the Airflow home"
    _scalar(url, "CREATE TABLE kept (n int); INSERT INTO kept VALUES (42)")
    assert _scalar(url, "SHOW listen_addresses") == "", "no TCP port: the Unix socket only"
    assert _scalar(url, "SHOW synchronous_commit") == "off"
    assert (data / ".s.PGSQL.5432").is_socket()

    assert airflow_db.start(home) == url, "a second start reuses the running server"
    assert airflow_db.stop(home) is True
    assert not airflow_db.running(home) and not (data / ".s.PGSQL.5432").exists()
    assert airflow_db.stop(home) is False, "stopping a stopped server is no error"

    airflow_db.start(home)
    assert _scalar(url, "SELECT n FROM kept") == 42


def test_two_homes_get_two_servers(home: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    try:
        assert airflow_db.url(home) != airflow_db.url(other)
        airflow_db.start(home)
        airflow_db.start(other)
        _scalar(airflow_db.url(home), "CREATE TABLE mine (n int)")
        assert _scalar(airflow_db.url(other), "SELECT count(*) FROM pg_tables WHERE tablename = 'mine'") == 0
    finally:
        airflow_db.remove(other)


def test_stopping_the_demo_airflow_stops_its_database(home: Path) -> None:
    airflow_db.start(home)
    assert airflow_proc.stop(home) == 0, "no Airflow process ran"
    assert not airflow_db.running(home)
    assert airflow_db.data_dir(home).exists(), "the data stays for the next start"


def test_the_demo_env_points_airflow_at_the_home_s_database(home: Path) -> None:
    settings = airflow_proc.AirflowSettings(home=home, dags_folder=home, plugins_folder=home,
                                            venv_bin=home, port=8282)
    assert airflow_proc.demo_env(settings)[airflow_proc.DB_ENV] == airflow_db.url(home)


def test_an_initdb_cut_short_is_done_again(home: Path) -> None:
    data = airflow_db.data_dir(home)
    data.mkdir(mode=0o700)
    (data / "half-written").write_text("")
    url = airflow_db.start(home)
    assert _scalar(url, "SELECT 1") == 1 and not (data / "half-written").exists()


def test_a_machine_without_postgresql_is_told_what_to_install(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(airflow_db, "POSTGRES_ROOT", tmp_path / "none")
    with pytest.raises(DemoError, match=r"apt-get install .*postgresql .*make debs"):
        airflow_db.start(tmp_path)
    assert not airflow_db.data_dir(tmp_path).exists(), "nothing made before the check"


@pytest.mark.skipif(os.geteuid() != 0, reason="the server runs as 'postgres' only when we are root")
def test_as_root_the_server_runs_as_debian_s_postgres_user(home: Path) -> None:
    airflow_db.start(home)
    pid = int((airflow_db.data_dir(home) / "postmaster.pid").read_text().split()[0])
    assert Path(f"/proc/{pid}").stat().st_uid == airflow_db.pwd.getpwnam("postgres").pw_uid
