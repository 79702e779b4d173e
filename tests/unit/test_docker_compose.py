"""docker-compose.yaml and docker/ checked without a Docker engine.

The parser is Debian's ``docker-compose`` package (Compose 1.29.2, ``/usr/bin/docker-compose``):
``config`` validates the file against the Compose schema, resolves anchors, merge keys, variable
interpolation (``${VAR:-default}``, ``${VAR:?error}``) and relative paths, and talks to no engine (the
tests point DOCKER_HOST at nothing to prove it). The docker CLI installed here has no ``compose``
plugin. The tests then read the resolved document that ``config`` prints and check what the schema
cannot: every image pinned to a tag (Dockerfile ``FROM`` lines too), every bind-mounted host path and
build context exists in the repo, the services and health checks a deployment needs, the example
connections parse as the plugins parse them, and the image's pins match ``requirements.lock``.
A missing ``docker-compose`` fails the tests (it is not skipped): install it with
``apt-get install docker-compose``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yaml"
DOCKER_DIR = ROOT / "docker"
SECRETS = {"AIRFLOW_JWT_SECRET": "test-jwt-secret", "AIRFLOW_FERNET_KEY": "test-fernet-key"}
AIRFLOW_SERVICES = ("airflow-apiserver", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer")
LONG_RUNNING = (*AIRFLOW_SERVICES, "postgres", "spark-master", "spark-worker")
SPARK_VERSION = "4.3.0"


def _compose_binary() -> str:
    found = shutil.which("docker-compose")
    if not found:
        pytest.fail("docker-compose not found: install Debian's docker-compose package "
                    "(apt-get install docker-compose); it validates docker-compose.yaml without an engine")
    return found


def _clean_env(**extra: str) -> dict[str, str]:
    """The environment for ``docker-compose``: none of the file's own variables leak in from the
    caller's shell (so the defaults are what is checked), no engine reachable."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AIRFLOW", "KAFKA_OPS_", "SPARK_", "POSTGRES_", "COMPOSE_", "DOCKER_"))}
    env["DOCKER_HOST"] = "unix:///nonexistent/docker.sock"
    env.update(extra)
    return env


def _compose(*args: str, file: Path = COMPOSE_FILE, env: dict[str, str] | None = None,
             cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [_compose_binary(), "--project-directory", str(cwd), "-f", str(file), *args],
        cwd=cwd, env=env if env is not None else _clean_env(**SECRETS),
        capture_output=True, text=True, timeout=60,
    )


@pytest.fixture(scope="module")
def resolved() -> dict:
    """The compose document as ``docker-compose config`` resolves it (every profile enabled)."""
    result = _compose("config")
    assert result.returncode == 0, result.stderr
    return yaml.safe_load(result.stdout)


def _environment(service: dict) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {k: "" if v is None else str(v) for k, v in env.items()}


def _mounts(service: dict) -> list[dict]:
    """Volumes as dicts ``{"source", "target", "read_only", "bind"}`` (short or long syntax)."""
    mounts = []
    for volume in service.get("volumes") or []:
        if isinstance(volume, str):
            parts = volume.split(":")
            source, target = parts[0], parts[1]
            mode = parts[2] if len(parts) > 2 else "rw"
            mounts.append({"source": source, "target": target, "read_only": "ro" in mode.split(","),
                           "bind": source.startswith(("/", "."))})
        else:
            mounts.append({"source": volume.get("source", ""), "target": volume["target"],
                           "read_only": bool(volume.get("read_only")), "bind": volume.get("type") == "bind"})
    return mounts


def _pinned(image: str) -> bool:
    """``name:tag`` (or a digest) with a tag that is not ``latest`` and no unresolved variable."""
    if "$" in image:
        return False
    if "@sha256:" in image:
        return True
    name, _, tag = image.rpartition(":")
    return bool(name) and "/" not in tag and bool(tag) and tag != "latest"


# -- the parser ------------------------------------------------------------------------------------


def test_config_validates_without_an_engine() -> None:
    result = _compose("config", "-q")
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""


def test_parser_rejects_what_the_schema_forbids(tmp_path: Path) -> None:
    """Proof that ``config -q`` validates: the same file with one unknown service option fails."""
    text = COMPOSE_FILE.read_text().replace("\n  postgres:\n", "\n  postgres:\n    restrat: always\n", 1)
    assert "restrat" in text
    broken = tmp_path / "docker-compose.yaml"
    broken.write_text(text)
    result = _compose("config", "-q", file=broken, cwd=tmp_path)
    assert result.returncode != 0
    assert "restrat" in result.stderr


def test_refuses_to_start_without_secrets() -> None:
    """No default JWT secret or Fernet key: ``config`` (and so ``up``) stops and says what to set."""
    result = _compose("config", "-q", env=_clean_env(AIRFLOW_FERNET_KEY="given"))
    assert result.returncode != 0
    assert "set AIRFLOW_JWT_SECRET in .env" in result.stderr


# -- images ----------------------------------------------------------------------------------------


def test_every_image_is_pinned(resolved: dict) -> None:
    for name, service in resolved["services"].items():
        assert "image" in service, f"{name}: no image (built images need a pinned tag too)"
        assert _pinned(service["image"]), f"{name}: image {service['image']!r} is not pinned to a tag"
        for arg, value in (service.get("build", {}).get("args") or {}).items():
            if arg.endswith("_IMAGE"):
                assert _pinned(value), f"{name}: build arg {arg}={value!r} is not pinned"


def test_dockerfiles_exist_and_pin_their_base_images(resolved: dict) -> None:
    built = {name: s["build"] for name, s in resolved["services"].items() if "build" in s}
    assert {"airflow-apiserver", "spark-worker"} <= set(built)
    for name, build in built.items():
        context = Path(build["context"])
        assert context.is_dir() and context.is_relative_to(ROOT), f"{name}: build context {context}"
        dockerfile = context / build.get("dockerfile", "Dockerfile")
        assert dockerfile.is_file(), f"{name}: {dockerfile} missing"
        text = dockerfile.read_text()
        args = dict(re.findall(r"^ARG (\w+)=(\S+)$", text, re.MULTILINE))
        froms = re.findall(r"^FROM (\S+)", text, re.MULTILINE)
        assert froms, f"{dockerfile}: no FROM"
        for base in froms:
            base = re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), m.group(0)), base)  # noqa: B023
            assert _pinned(base), f"{dockerfile}: base image {base!r} is not pinned"
        # The compose file's build args override the Dockerfile defaults: both must agree.
        for arg, value in (build.get("args") or {}).items():
            assert args.get(arg) == value, f"{name}: build arg {arg}={value!r}, {dockerfile.name} has {args.get(arg)!r}"
        for copied in re.findall(r"^COPY (?:--\S+ )*(\S+) ", text, re.MULTILINE):
            assert (context / copied).exists(), f"{dockerfile}: COPY source {copied} missing"


def test_airflow_image_is_the_official_3_3_2_python_3_11(resolved: dict) -> None:
    args = resolved["services"]["airflow-scheduler"]["build"]["args"]
    assert args["AIRFLOW_IMAGE"] == "apache/airflow:3.3.2-python3.11"
    text = (DOCKER_DIR / "Dockerfile").read_text()
    assert "default-jre-headless" in text, "spark-submit needs a Java runtime"
    assert "--force-reinstall --no-deps pyspark==4.3.0" in text, "pyspark-client overwrites pyspark: reinstall last"


def test_spark_images_match_the_driver(resolved: dict) -> None:
    """Driver (pyspark in the Airflow image) and executors (official Spark image) run one Spark version."""
    services = resolved["services"]
    assert services["spark-master"]["image"].startswith(f"apache/spark:{SPARK_VERSION}-")
    assert services["spark-worker"]["build"]["args"]["SPARK_IMAGE"] == services["spark-master"]["image"]
    assert f"pyspark=={SPARK_VERSION}" in (DOCKER_DIR / "requirements.txt").read_text()


# -- pins ------------------------------------------------------------------------------------------


def _lock() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        if "==" in line and not line.startswith("#"):
            name, version = line.split("==", 1)
            pins[re.sub(r"[-_.]+", "-", name).lower()] = version.strip()
    return pins


def test_image_requirements_match_the_lock() -> None:
    lock = _lock()
    pins = re.findall(r"^([A-Za-z0-9_.\-]+)==(\S+)$", (DOCKER_DIR / "requirements.txt").read_text(), re.MULTILINE)
    pins += re.findall(r"\b([a-z][a-z0-9_\-]*)==([0-9][^\s\"']*)", (DOCKER_DIR / "spark.Dockerfile").read_text())
    pins += re.findall(r"\b(pyspark)==([0-9][^\s\"']*)", (DOCKER_DIR / "Dockerfile").read_text())
    assert len(pins) > 10
    for name, version in pins:
        key = re.sub(r"[-_.]+", "-", name).lower()
        assert key in lock, f"{name} is pinned for the image but not in requirements.lock"
        assert lock[key] == version, f"{name}=={version} for the image, {lock[key]} in requirements.lock"
    names = {re.sub(r"[-_.]+", "-", n).lower() for n, _ in pins}
    needed = {"apache-airflow-providers-ssh", "apache-airflow-providers-apache-spark", "pyspark", "confluent-kafka",
              "kafka-python", "kazoo", "javaproperties", "jsonschema", "requests", "matplotlib"}
    assert needed <= names, f"not installed in the image: {sorted(needed - names)}"


# -- services, health checks, mounts ---------------------------------------------------------------


def test_services_and_health_checks(resolved: dict) -> None:
    services = resolved["services"]
    for name in (*LONG_RUNNING, "airflow-init"):
        assert name in services, f"service {name} missing"
    for name in LONG_RUNNING:
        check = services[name].get("healthcheck") or {}
        assert check.get("test") and not check.get("disable"), f"{name}: no health check"
    commands = {name: services[name].get("command") for name in AIRFLOW_SERVICES}
    assert commands == {"airflow-apiserver": "api-server", "airflow-scheduler": "scheduler",
                        "airflow-dag-processor": "dag-processor", "airflow-triggerer": "triggerer"}
    for name in AIRFLOW_SERVICES:
        depends = services[name]["depends_on"]
        assert depends["postgres"]["condition"] == "service_healthy", name
        assert depends["airflow-init"]["condition"] == "service_completed_successfully", name
        env = _environment(services[name])
        assert env["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor"
        assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].startswith("postgresql+psycopg2://airflow:")
        assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].endswith("@postgres/airflow")
        assert env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] == "http://airflow-apiserver:8080/execution/"
        assert env["AIRFLOW__API_AUTH__JWT_SECRET"] == SECRETS["AIRFLOW_JWT_SECRET"], "one JWT secret for all"
    assert "airflow db migrate" in " ".join(services["airflow-init"]["command"])
    assert services["postgres"]["image"].startswith("postgres:")


def test_bind_mounts_exist_in_the_repo(resolved: dict) -> None:
    seen = 0
    for name, service in resolved["services"].items():
        for mount in _mounts(service):
            if not mount["bind"]:
                assert mount["source"] in resolved.get("volumes", {}), f"{name}: undeclared volume {mount}"
                continue
            source = Path(mount["source"])
            assert source.is_relative_to(ROOT), f"{name}: bind mount {source} outside the repo"
            assert source.exists(), f"{name}: bind-mounted {source.relative_to(ROOT)} does not exist"
            seen += 1
    assert seen >= 6 * len(AIRFLOW_SERVICES)


def test_airflow_mounts(resolved: dict) -> None:
    for name in (*AIRFLOW_SERVICES, "airflow-init"):
        mounts = {m["target"]: m for m in _mounts(resolved["services"][name])}
        for folder in ("dags", "plugins", "spark"):
            assert mounts[f"/opt/airflow/{folder}"]["source"] == str(ROOT / folder), name
        assert mounts["/opt/airflow/ssh"]["read_only"], f"{name}: the SSH key must be mounted read-only"
        assert mounts["/opt/airflow/known_hosts"]["read_only"], name
        assert not mounts["/opt/kafka-ops/data"]["read_only"], f"{name}: the planner writes its plans there"
    worker = {m["target"]: m for m in _mounts(resolved["services"]["spark-worker"])}
    scheduler = {m["target"]: m for m in _mounts(resolved["services"]["airflow-scheduler"])}
    assert worker["/opt/kafka-ops/data"]["source"] == scheduler["/opt/kafka-ops/data"]["source"], \
        "executors read the snapshot at the driver's path"
    assert (ROOT / "plugins" / ".airflowignore").is_file()


def test_private_keys_are_never_committed() -> None:
    for folder in ("ssh", "known_hosts", "data"):
        ignore = (DOCKER_DIR / folder / ".gitignore").read_text().split()
        assert ignore[0] == "*", f"docker/{folder}/.gitignore must ignore everything but its README"
    tracked = subprocess.run(["git", "ls-files", "docker/ssh"], cwd=ROOT, capture_output=True, text=True).stdout
    assert not [p for p in tracked.split() if not p.endswith((".gitignore", "README.md"))], tracked


# -- connections -----------------------------------------------------------------------------------


def _connections(service: dict) -> dict[str, dict]:
    return {k.removeprefix("AIRFLOW_CONN_").lower(): v for k, v in _environment(service).items()
            if k.startswith("AIRFLOW_CONN_")}


def test_spark_default_points_at_the_master(resolved: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    uri = _connections(resolved["services"]["airflow-scheduler"])["spark_default"]
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", uri)
    assert SparkSubmitHook(conn_id="spark_default")._resolve_connection()["master"] == "spark://spark-master:7077"
    master = resolved["services"]["spark-master"]
    assert master["command"][-2:] == ["--host", "spark-master"]
    assert resolved["services"]["spark-worker"]["command"][-1] == "spark://spark-master:7077"


def test_example_cluster_profile_parses_like_the_plugins_read_it(
    resolved: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hooks.cluster_profile import get_cluster_profile

    service = resolved["services"]["airflow-scheduler"]
    connections = _connections(service)
    docs = {conn_id: json.loads(value) for conn_id, value in connections.items() if value.lstrip().startswith("{")}
    kafka = [conn_id for conn_id, doc in docs.items() if doc["conn_type"] == "kafka"]
    assert kafka, "no example kafka connection"
    mounted = [m["target"] for m in _mounts(service)]
    for conn_id in kafka:
        monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", connections[conn_id])
        profile = get_cluster_profile(conn_id)
        assert profile.ssh_conn_id and profile.zookeeper and profile.burrow_conn_id and profile.consumer_groups
        assert profile.service_stop == "sudo systemctl stop kafka"
        ssh = docs[profile.ssh_conn_id]
        assert ssh["conn_type"] == "ssh" and docs[profile.burrow_conn_id]["conn_type"] == "http"
        extra = ssh["extra"]
        assert extra["no_host_key_check"] is False and extra["allow_host_key_change"] is False
        for path in (extra["key_file"], extra["known_hosts"]):
            assert any(path.startswith(target + "/") for target in mounted), f"{path} is not in a mounted folder"


def test_airflow_services_parse_unchanged_dag_files_as_rarely_as_the_demo(resolved: dict) -> None:
    """Every Airflow service re-parses an unchanged DAG file every 600 s, as the demo's Airflow does
    (``demo.airflow_proc.TUNING``, measured there); a changed file is parsed at once in both."""
    from demo.airflow_proc import TUNING

    key = "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL"
    assert TUNING[key] == "600"
    for name in AIRFLOW_SERVICES:
        assert str(resolved["services"][name]["environment"][key]) == TUNING[key], name


def test_task_processes_keep_their_bytecode_on_a_writable_volume(resolved: dict, tmp_path: Path) -> None:
    """dags/ and plugins/ are mounted read-only, so each task process (one per task) would compile them again:
    every Airflow service writes Python's bytecode under ``PYTHONPYCACHEPREFIX``, a named volume they share that
    the image creates owned by ``airflow`` (a new volume starts as a copy of the image's folder), and no
    ``PYTHONDONTWRITEBYTECODE`` switches it off. Then the two variables, as resolved, are given to a Python that
    imports a copy of the plugins: the compiled files land under the prefix, none beside the sources."""
    prefixes = set()
    for name in (*AIRFLOW_SERVICES, "airflow-init"):
        service = resolved["services"][name]
        env = _environment(service)
        assert env.get("PYTHONDONTWRITEBYTECODE", "") == "", f"{name}: bytecode writing is switched off"
        prefix = env.get("PYTHONPYCACHEPREFIX")
        assert prefix, f"{name}: no PYTHONPYCACHEPREFIX: each task compiles the read-only plugins again"
        mounts = {m["target"]: m for m in _mounts(service)}
        assert prefix in mounts, f"{name}: {prefix} is not a mounted volume (a container's own files are lost)"
        assert not mounts[prefix]["bind"] and not mounts[prefix]["read_only"], f"{name}: {mounts[prefix]}"
        prefixes.add(mounts[prefix]["source"])
    assert len(prefixes) == 1, f"the services do not share one bytecode volume: {prefixes}"
    dockerfile = (DOCKER_DIR / "Dockerfile").read_text()
    created = re.search(r"install -d -o airflow -g 0 -m 2775 ([^\n&]*)", dockerfile)
    assert created and prefix in created.group(1).split(), "the image does not create the cache folder for airflow"

    plugins = tmp_path / "plugins"
    shutil.copytree(ROOT / "plugins", plugins, ignore=shutil.ignore_patterns("__pycache__"))
    cache = tmp_path / "pycache"
    # the services' own values, the prefix moved from the volume to a folder of the test's
    service_env = _environment(resolved["services"]["airflow-scheduler"])
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": service_env.get("PYTHONDONTWRITEBYTECODE", ""),
           "PYTHONPYCACHEPREFIX": str(cache / service_env["PYTHONPYCACHEPREFIX"].lstrip("/")),
           "PYTHONPATH": str(plugins)}
    subprocess.run([sys.executable, "-c", "import kafka_ops.health, kafka_ops.roll"], env=env, check=True,
                   timeout=60)
    assert not list(plugins.rglob("*.pyc")), "bytecode written beside the read-only sources"
    compiled = {p.name.split(".")[0] for p in cache.rglob("*.pyc")}
    assert {"health", "roll"} <= compiled, sorted(compiled)
