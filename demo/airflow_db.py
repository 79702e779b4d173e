"""The metadata database of the demo's Airflow: a PostgreSQL server of its own, from Debian's ``postgresql``.

``airflow standalone`` defaults to SQLite, where one writer locks the whole database file: on 2 cores a roll's
task waited about 5 s (SQLite's busy timeout) now and then for the scheduler or the dag-processor, e.g. a POST
of an XCom took 5.09 s and Airflow logged "database is locked" (3 such waits in 4 runs of a 3-broker roll).
PostgreSQL, which Airflow runs on in production (``docker-compose.yaml``), locks rows instead.

One server per Airflow home, reached only through a Unix socket in its data directory (``listen_addresses`` is
empty: no TCP port to collide with another Airflow's), with local ``trust`` authentication: the socket's
directory is readable by the server's user alone (and root). The data directory lives in the machine's temp
directory, named after the home (:func:`data_dir`): PostgreSQL refuses to run as root, so as root the server
runs as Debian's ``postgres`` user, which cannot enter the private temp directories tests and benches make
their Airflow homes in. ``synchronous_commit`` is off (a crash of the machine may lose the last commits, never
the database's consistency): a sandbox's history is not worth an fsync per task.
"""

from __future__ import annotations

import hashlib
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

from demo.errors import DemoError

POSTGRES_ROOT = Path("/usr/lib/postgresql")  # Debian's layout: /usr/lib/postgresql/<major>/bin
SERVER_USER = "postgres"  # the user Debian's postgresql package creates; the server's user when we are root
DB_USER = "airflow"
DB_NAME = "airflow"
START_TIMEOUT_S = 60
SETTINGS = {
    "listen_addresses": "''",
    "max_connections": "200",  # standalone's components each keep a pool (5 + 10 overflow), the api-server two
    "shared_buffers": "'64MB'",
    "synchronous_commit": "off",
    "log_min_messages": "warning",
}


def bin_dir() -> Path:
    """The newest installed PostgreSQL's ``bin`` (``/usr/lib/postgresql/<major>/bin``).

    Raises:
        DemoError: no PostgreSQL server is installed (names the Debian package).
    """
    found = sorted((p for p in POSTGRES_ROOT.glob("*/bin") if (p / "pg_ctl").exists()),
                   key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0)
    if not found:
        raise DemoError(f"no PostgreSQL server under {POSTGRES_ROOT}/*/bin (the demo's Airflow keeps its metadata "
                        "there): sudo apt-get install -y --no-install-recommends postgresql   (or: make debs)")
    return found[-1]


def data_dir(home: Path) -> Path:
    """The server's data directory for the Airflow home ``home``: ``<tmp>/kops-airflow-db-<16 hex of home>``.

    Also the directory of its Unix socket (``.s.PGSQL.5432``), so the path stays far below the 107 bytes a socket
    path may have."""
    digest = hashlib.sha256(str(home.resolve()).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"kops-airflow-db-{digest}"


def url(home: Path) -> str:
    """The SQLAlchemy URL of ``home``'s database (psycopg2 over the Unix socket); Airflow derives its async URL
    (asyncpg) from it."""
    return f"postgresql+psycopg2://{DB_USER}@/{DB_NAME}?host={data_dir(home)}"


def _server_user() -> dict[str, object]:
    """``subprocess`` arguments that run a PostgreSQL program as the server's user: ours, or ``postgres`` as root.

    Raises:
        DemoError: we are root and the ``postgres`` user does not exist.
    """
    if os.geteuid() != 0:
        return {}
    try:
        entry = pwd.getpwnam(SERVER_USER)
    except KeyError:
        raise DemoError(f"PostgreSQL refuses to run as root and there is no user {SERVER_USER!r} to run it as: "
                        "install Debian's postgresql package (make debs), which creates it") from None
    return {"user": entry.pw_uid, "group": entry.pw_gid}


def _run(args: list[str], what: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(args, capture_output=True, text=True, stdin=subprocess.DEVNULL, **kwargs)  # type: ignore[call-overload]
    if proc.returncode != 0:
        raise DemoError(f"{what} failed (exit {proc.returncode}): {(proc.stderr or proc.stdout).strip()[-2000:]}")
    return proc


def _pg_ctl(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``pg_ctl <args> -D <data>`` as the server's user, run from ``/`` (that user may not enter our directory)."""
    return subprocess.run([str(bin_dir() / "pg_ctl"), *args, "-D", str(data)], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, cwd="/", **_server_user())  # type: ignore[call-overload]


def running(home: Path) -> bool:
    """True when ``home``'s server runs (``pg_ctl status``)."""
    data = data_dir(home)
    return (data / "PG_VERSION").exists() and _pg_ctl(data, "status").returncode == 0


def _init(data: Path, as_user: dict[str, object]) -> None:
    data.mkdir(mode=0o700)
    if as_user:
        os.chown(data, as_user["user"], as_user["group"])  # type: ignore[arg-type]
    _run([str(bin_dir() / "initdb"), "-D", str(data), "-U", DB_USER, "--auth=trust", "-E", "UTF8",
          "--locale=C.UTF-8"], "initdb of the demo's Airflow database", cwd="/", **as_user)
    with open(data / "postgresql.conf", "a") as conf:
        conf.write("\n# kafka-ops: the demo's Airflow metadata database\n")
        conf.write(f"unix_socket_directories = '{data}'\n")
        for key, value in SETTINGS.items():
            conf.write(f"{key} = {value}\n")


def start(home: Path, timeout_s: float = START_TIMEOUT_S) -> str:
    """Create (once) and start ``home``'s server unless it runs, and its database; returns :func:`url`.

    Raises:
        DemoError: PostgreSQL is not installed, or initdb, the start (its log's tail is in the message) or the
            database's creation failed.
    """
    data, as_user = data_dir(home), _server_user()
    bins = bin_dir()
    if not (data / "PG_VERSION").exists():
        if data.exists():  # an initdb that did not finish
            shutil.rmtree(data)
        _init(data, as_user)
    if not running(home):
        log = data / "server.log"
        proc = _pg_ctl(data, "start", "-w", "-t", str(int(timeout_s)), "-l", str(log))
        if proc.returncode != 0:
            tail = log.read_text(errors="replace").splitlines()[-10:] if log.exists() else []
            raise DemoError(f"the demo's Airflow database did not start ({data}): {proc.stderr.strip()} "
                            + " | ".join(tail))
    psql = [str(bins / "psql"), "-h", str(data), "-U", DB_USER, "-d", "postgres", "-tAc"]
    found = _run([*psql, f"SELECT 1 FROM pg_database WHERE datname = '{DB_NAME}'"], "psql")
    if found.stdout.strip() != "1":
        _run([*psql, f"CREATE DATABASE {DB_NAME}"], f"creating the database {DB_NAME}")
    return url(home)


def stop(home: Path) -> bool:
    """Stop ``home``'s server (fast shutdown: open sessions are ended). Returns False when it was not running.

    Raises:
        DemoError: ``pg_ctl stop`` failed.
    """
    if not running(home):
        return False
    proc = _pg_ctl(data_dir(home), "stop", "-m", "fast", "-w")
    if proc.returncode != 0:
        raise DemoError(f"stopping the demo's Airflow database failed (exit {proc.returncode}): {proc.stderr.strip()}")
    return True


def remove(home: Path) -> None:
    """Stop ``home``'s server and delete its data directory (what a test or a bench leaves behind)."""
    if data_dir(home).exists():
        try:
            stop(home)
        except DemoError:
            pass  # the data goes anyway: a server whose postmaster.pid is gone shuts itself down within a minute
        shutil.rmtree(data_dir(home), ignore_errors=True)
