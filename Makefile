# kafka-ops: `make demo` runs the rolling restart on the sandbox, `make test` runs every test.
# Both install what they need on a fresh Debian machine (as root): Debian packages + .venv.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
DEBIAN_PACKAGES := zookeeper openssh-server openssh-client default-jre-headless maven procps docker-compose chromium postgresql \
	golang-github-shopify-sarama-dev golang-github-samuel-go-zookeeper-dev golang-github-spf13-viper-dev \
	golang-go.uber-zap-dev golang-gopkg-natefinch-lumberjack.v2-dev golang-github-julienschmidt-httprouter-dev \
	golang-github-karrick-goswarm-dev golang-github-oneofone-xxhash-dev golang-github-pborman-uuid-dev
WORKDIR ?= .sandbox
PYTEST_ARGS ?=

.PHONY: install debs venv kafka burrow test test-all unit lint demo down lock sandbox-up sandbox-down

install: debs venv kafka burrow

# Debian packages: ZooKeeper, sshd (the sandbox's real parts), a Java runtime and Maven (Kafka from Maven
# Central), Burrow's Go libraries (Burrow is built from Debian's source, see sandbox/burrow_build.py) and Go
# when the machine has none, Chromium (tests/ui), PostgreSQL (the demo's Airflow metadata database).
debs:
	@missing=""; for p in $(DEBIAN_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	command -v go >/dev/null 2>&1 || test -x /usr/local/go/bin/go || missing="$$missing golang-go"; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi

# The venv from the lock file; the Spark provider's pyspark-client overwrites pyspark's files,
# so pyspark is reinstalled last (see docs/architecture.md) and its version checked.
$(VENV)/.installed: requirements.lock
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.lock
	$(PY) -m pip install -q --force-reinstall --no-deps pyspark==4.3.0
	$(PY) -c "import pyspark; assert pyspark.__version__ == '4.3.0', pyspark.__version__"
	touch $@

venv: $(VENV)/.installed

# Real Apache Kafka releases (pinned in sandbox/kafka_release.py) assembled from Maven Central into .cache/kafka/;
# a second run downloads nothing.
kafka: venv
	$(PY) -m sandbox.kafka_release install

# Burrow 1.2.1 from Debian's source with ListOffsets v1 (Kafka 4.x removed v0), into .cache/burrow/.
burrow: venv debs
	$(PY) -m sandbox.burrow_build

lock:
	$(PY) -m pip freeze --exclude-editable > requirements.lock

lint: venv
	$(VENV)/bin/ruff check .

unit: venv
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

# TEST_WORKERS=N runs N pytest-xdist workers, each with its own shared sandbox and Airflow home; a test module stays
# on one worker (--dist loadfile). Default 0 = one process: on 2 cores two workers took 91 min against 55-75 for one (JVMs,
# Airflow and Chromium compete for the CPU; SSH channels and UI waits time out), so only a bigger machine gains.
TEST_WORKERS ?= 0
# `make test` (CI) runs every test but those marked `extended`: each operation, DAG and UI action on real Kafka with
# the faults of each kind; `extended` marks the rest of the fault matrix (further faults of a kind CI already
# covers, longer outages) and operations in a shape CI runs in another, which `make test-all` adds. See tests/conftest.py and the README.
TEST_SELECTION ?= not extended
test: install
	$(VENV)/bin/ruff check .
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile -m "$(TEST_SELECTION)" $(PYTEST_ARGS)

test-all: install
	$(VENV)/bin/ruff check .
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

sandbox-up: install
	$(PY) -m sandbox up --workdir $(WORKDIR)

sandbox-down:
	-test -x $(PY) && $(PY) -m sandbox down --workdir $(WORKDIR)

demo: install
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) -m demo

# Airflow first (its tasks must not touch the sandbox mid-stop), then the sandbox: both in demo --down.
down:
	-test -x $(PY) && $(PY) -m demo --down
