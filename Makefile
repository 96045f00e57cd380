# Two commands matter: `make demo` and `make test`. Each sets up everything it needs first,
# idempotently: system packages, a virtualenv with the Python dependencies, the Kafka broker jars
# and the PostgreSQL JDBC driver (downloads cached in ~/.m2, ~/.cache/pip and ~/.cache/kafka-health).

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
PYTEST_ARGS ?=
# The Kafka version matrix (scripts/compat-runs.sh): the contract suite and one end-to-end run per
# broker version; `make test` adds the CI versions, two at a time, after the whole suite.
COMPAT_KAFKA_VERSIONS ?= 2.8.2 3.6.2 3.9.1 4.1.2 4.4.0
CI_KAFKA_VERSIONS     ?= 2.8.2 3.9.1
COMPAT_JOBS           ?= 1
TEST_SHARDS           ?= 2
UNIT_WORKERS          ?= 2
BENCH_ARGS  ?=

.PHONY: demo test durations test-compat test-spark-standalone test-unit soak lint format records setup install bootstrap bench clean down help image

help:
	@echo "make demo   - local 3-node Kafka + PostgreSQL + Spark, and the monitor daemon with its web UI"
	@echo "make test   - the whole test suite (unit, integration on real Kafka/PostgreSQL/Spark) and lint"
	@echo "make test-compat - the Kafka contract suite and an end-to-end run against every supported broker version"
	@echo "make test-unit - the fast tier: tests that start no JVM and no server (under a minute)"
	@echo "make lint   - ruff, mypy (strict on monitor/) and the import layering contracts"
	@echo "make records - regenerate the read records' typed columns from monitor/core/derived.py"
	@echo "make down   - stop the local Kafka cluster and PostgreSQL started by the demo"
	@echo "make soak   - only the soak test: ten minutes of traffic through broker, PostgreSQL and receiver outages"
	@echo "make bench  - every benchmark, a results table and plots in bench/results/ (BENCH_ARGS=--quick)"
	@echo "make image  - the container image, with docker or podman (IMAGE=name:tag)"

# The install steps are scripts/install.sh's, which the Dockerfile runs too.
$(STAMP): pyproject.toml scripts/system-deps.sh scripts/install.sh
	@PYTHON=$(PYTHON) bash scripts/system-deps.sh
	@PYTHON=$(PYTHON) bash scripts/install.sh packages --venv $(VENV) --dev
	@touch $(STAMP)

install: $(STAMP)

# Fetch the Kafka jars and the JDBC driver, and check the PostgreSQL server binaries.
bootstrap: install
	@bash scripts/install.sh runtime --venv $(VENV)

# The container image (Dockerfile), with docker or podman; says so where neither is usable.
image:
	@bash scripts/image.sh

# mypy keeps its cache beside the other downloads (~/.cache/kafka-health/mypy), not in the
# checkout: a fresh clone (CI's) checks only what changed since the last check on this machine,
# seconds instead of minutes (mypy compares each module's hash, so a stale entry is rechecked).
MYPY_CACHE_DIR ?= $(or $(KAFKA_HEALTH_CACHE),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/kafka-health)/mypy

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy --cache-dir "$(MYPY_CACHE_DIR)"
	$(BIN)/lint-imports

# The lint beside the whole suite at the default Kafka version, as TEST_SHARDS sessions side by
# side (two unless set: scripts/test-shards.sh; `make durations` rebalances them after a run), then
# the matrix at the versions CI adds (scripts/test-all.sh).
test: bootstrap
	@TEST_SHARDS=$(TEST_SHARDS) PYTEST_ARGS='$(PYTEST_ARGS)' bash scripts/test-all.sh $(BIN) $(CI_KAFKA_VERSIONS)

test-compat: bootstrap
	@COMPAT_JOBS=$(COMPAT_JOBS) PYTEST_ARGS="$(PYTEST_ARGS)" bash scripts/compat-runs.sh $(BIN)/pytest $(COMPAT_KAFKA_VERSIONS)

# tests/durations.json from the JUnit reports of the last `make test`: the shards' balance.
durations: install
	$(BIN)/python scripts/test-durations.py $${KAFKA_HEALTH_VAR:-var}/test-report-*.xml

# The evaluation on a Spark standalone master and two workers equals local mode's (left out of `make test`).
test-spark-standalone: bootstrap
	$(BIN)/pytest -m standalone $(PYTEST_ARGS)

# The fast tier: no Kafka, PostgreSQL, Spark or browser is set up or started (the unit tests and
# the fake half of the Kafka contract suite).
# Two workers, each taking whole modules (a module's shared fixtures are made once); UNIT_WORKERS=0
# runs the tier in one process. Bytecode is cached even where the environment says not to (each of
# the three processes compiled every module again, 6 s), and the schema and property-testing
# plugins, which no test of the tier uses, are not loaded.
test-unit: install
	PYTHONDONTWRITEBYTECODE= $(BIN)/pytest tests/unit tests/contract -m unit -n $(UNIT_WORKERS) --dist loadfile \
		-p no:schemathesis -p no:hypothesispytest $(PYTEST_ARGS)

soak: bootstrap
	$(BIN)/pytest -m soak -s $(PYTEST_ARGS)

# The benchmarks (bench/README.md): the bench extra (matplotlib, for the plots), then bench/run.py.
$(VENV)/.bench-installed: $(STAMP)
	@$(BIN)/python -m pip install -q -e '.[dev,bench]'
	@touch $@

bench: bootstrap $(VENV)/.bench-installed
	$(BIN)/python bench/run.py $(BENCH_ARGS)

demo: bootstrap
	$(BIN)/kafka-health demo $(DEMO_ARGS)

down: install
	-$(BIN)/kafka-health dev-cluster down
	-$(BIN)/kafka-health db down

format: install
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# The read records' columns (monitor/expose/read/derived_records.py) from the derived contract: run
# after adding or changing a column in monitor/core/derived.py (a unit test fails until then).
records: install
	$(BIN)/python -m monitor.expose.read.record_columns

clean: down
	rm -rf var .pytest_cache .mypy_cache .ruff_cache
