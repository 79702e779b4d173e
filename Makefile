# kafka-ops: `make demo` runs the rolling restart on the sandbox, `make test` runs every test.
# Both install what they need on a fresh Debian machine (as root): Debian packages + .venv.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
DEBIAN_PACKAGES := zookeeper burrow openssh-server openssh-client default-jre-headless procps docker-compose chromium
WORKDIR ?= .sandbox
PYTEST_ARGS ?=

.PHONY: install debs venv test unit lint demo down lock sandbox-up sandbox-down

install: debs venv

# Debian packages: ZooKeeper, Burrow, sshd (the sandbox's real parts), a Java runtime, Chromium (tests/ui).
debs:
	@missing=""; for p in $(DEBIAN_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
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

lock:
	$(PY) -m pip freeze --exclude-editable > requirements.lock

lint: venv
	$(VENV)/bin/ruff check .

unit: venv
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

test: install
	$(VENV)/bin/ruff check .
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) -m pytest $(PYTEST_ARGS)

sandbox-up: install
	$(PY) -m sandbox up --workdir $(WORKDIR)

sandbox-down:
	-test -x $(PY) && $(PY) -m sandbox down --workdir $(WORKDIR)

demo: install
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) -m demo

# Airflow first (its tasks must not touch the sandbox mid-stop), then the sandbox: both in demo --down.
down:
	-test -x $(PY) && $(PY) -m demo --down
