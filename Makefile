# CDC lakehouse: dbt on an embedded Spark session with Apache Iceberg.
#   make demo   sample raw data, stage by stage, through the whole pipeline (the main job)
#   make run    the pipeline once over whatever is in $CDC_LANDING_ROOT (what a scheduler calls)
#   make status where each table stands (exit 1 on a refusal or a stale table)
#   make maintain  table maintenance: compaction, manifests, snapshot expiry, orphan files
#   make test-fast / test / test-all   the test tiers: no JVM (2 min); every test but the long suites; all (docs/tests.md)
#   make fuzz   damaged raw files: a long hypothesis run on the Python side, then the whole corpus through Spark
#   make soak   a simulated day: 20 tables, a run every 5 minutes (1 % killed), maintain hourly, then checked
#   make cluster-up / cluster-down / cluster-status   the shared target on this machine (CDC_TARGET=cluster)
#   make s3-up / s3-down / s3-status   a local S3 server (SeaweedFS) on 127.0.0.1, data in data/s3
#   make live-up / live-workload / live-drain / live-down / live-status   a live PostgreSQL source captured by
#               Debezium into $CDC_LANDING_ROOT/debezium/topics/ (python_hooks/live/)
#   make demo-live  that source end to end: capture, workload, `run --every`, compared with PostgreSQL, latency
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin

# CDC_LANDING_ROOT, CDC_WAREHOUSE (whose default depends on CDC_TARGET) and the jars (CDC_SPARK_JARS) get
# their defaults, made absolute, from python_hooks/project/env.py, which every Python of the venv applies.
export DBT_PROFILES_DIR := $(CURDIR)/profiles

.PHONY: help install jvm-classes check-java system-packages cluster-packages demo run status maintain test test-fast test-all \
	test-embedded test-servers test-live-browser test-adapter-cluster faults fuzz soak bench lint docs docs-serve clean \
	cluster-up cluster-down cluster-status s3-up s3-down s3-status bench-scale bench-s3 \
	live-up live-workload live-drain live-down live-status test-live demo-live test-adapter

SQL_PATHS := $(wildcard models snapshots tests analyses)
DOCS_PORT ?= 8080

help:
	@echo "make help    this list"
	@echo "make install the venv (.venv, requirements.txt), the jars (jars/pom.xml into jars/lib/) and the JVM's class archive"
	@echo "             (.venv/cdc-jvm/: a new process loads Spark's classes from it); every target runs it"
	@echo "make jvm-classes  that class archive made again (after a JDK upgrade)"
	@echo "make check-java  say what to install when Java (a JDK 17, for Spark) is missing"
	@echo "make system-packages  the Debian packages: a JDK 17, Maven, Chromium (browser tests) and cluster-packages"
	@echo "make cluster-packages  PostgreSQL and its JDBC driver (the cluster target, the live source), when missing"
	@echo "make demo    write sample DMS/Debezium change files stage by stage and run the pipeline after each"
	@echo "make run     run the pipeline once on \$$CDC_LANDING_ROOT (default data/landing); CDC_VERBOSE=1 shows dbt's lines"
	@echo "make status  per table: rows, last run and its counts, lag, files waiting/refused (PLOT=lag.png draws it)"
	@echo "make maintain  compact, rewrite manifests, expire snapshots (+cdc_retention), remove orphan files"
	@echo "make test-fast  lint, the unit tests and the lint rules' tests: no JVM, no server (about 2 minutes)"
	@echo "make test    every test but the long suites (real Spark + Iceberg, the cluster, S3, PostgreSQL, Chromium),"
	@echo "             as two pytest processes side by side; of the kill points and the fuzz corpus, a smoke subset"
	@echo "make test-embedded  the part of make test on this process's embedded Spark (a CI job)"
	@echo "make test-servers   the part on the test cluster, the S3 server and the project's commands as processes (a CI job)"
	@echo "make test-live-browser  the part on a live PostgreSQL + Debezium and in headless Chromium (a CI job)"
	@echo "make test-all  make test, the whole adapter suite, make faults, make fuzz and a short soak (nightly)"
	@echo "make test-adapter  dbt Labs' adapter test suite with the project's macros, every class (docs/models.md)"
	@echo "make test-adapter-cluster  the same on the cluster target (a cluster of its own, warehouse on a local S3 server)"
	@echo "make faults  the fault-injection suite on both targets: a run killed (SIGKILL) at every kill point, then repaired by the next;"
	@echo "             then on a cluster of its own the same, and its Thrift Server, metastore PostgreSQL and worker hit mid-MERGE"
	@echo "             (about 40 minutes on 2 cores: 24 embedded, 16 on the cluster)"
	@echo "make fuzz    damaged raw files (FUZZ_EXAMPLES=20000 hypothesis cases without Spark), then every corpus case with Spark,"
	@echo "             then FUZZ_SEQUENCES=25 sequences of runs (land, damage, remove, replace, add a column, run)"
	@echo "make soak    a simulated day (SOAK_* knobs, docs/performance.md): runs, kills, maintenance, then every table checked"
	@echo "make lint    sqlfluff, ruff, the import layers of python_hooks and the pre-commit checks"
	@echo "make docs    build the dbt docs site (target/index.html, target/static_index.html) and the manual (target/manual/)"
	@echo "make docs-serve  serve it on http://localhost:$(DOCS_PORT)"
	@echo "make bench   the benchmark (bench/README.md); make bench-scale: M and Z at 200 tables; make bench-s3: on S3"
	@echo "make cluster-up      start the shared target: PostgreSQL metastore, Spark master + worker, Thrift Server"
	@echo "                     then CDC_TARGET=cluster make run|demo, or dbt ... --target cluster"
	@echo "make cluster-down    stop it;  make cluster-status  what runs"
	@echo "make s3-up   start a local S3 server (SeaweedFS) on 127.0.0.1:$(or $(CDC_S3_PORT),8333), data in data/s3, a bucket made"
	@echo "make s3-down stop it;  make s3-status  what runs, where;  .venv/bin/python -m python_hooks s3 env  its AWS_* variables"
	@echo "make live-up       start a live PostgreSQL source (127.0.0.1:$(or $(CDC_LIVE_PG_PORT),15433)), fill it, capture it with Debezium"
	@echo "                   into \$$CDC_LANDING_ROOT/debezium/topics/ as the Kafka Connect S3 sink writes Parquet"
	@echo "make live-workload transactions on it (ROUNDS=20); make live-drain  wait until the capture landed them"
	@echo "make live-down     stop the capture and the source;  make live-status  what runs, the files written"
	@echo "make demo-live     the live source end to end (EVERY=10 s between runs, MINUTES=2 of workload, the snapshot"
	@echo "                   every DOWNSTREAM_EVERY=300 s and by the last run): PostgreSQL,"
	@echo "                   capture, workload, run --every, then compared with PostgreSQL and the latency; all stopped"
	@echo "make test-live     the live capture's tests only (PostgreSQL + Debezium, no Spark; make test runs them too)"
	@echo "make clean   remove run outputs (data/, target/, logs/)"

$(BIN)/python:
	@command -v $(PYTHON) >/dev/null || { echo "$(PYTHON) not found: install Python 3.11"; exit 1; }
	$(PYTHON) -m venv $(VENV)

# Re-installs when the pins change. The .pth start-up hook gives dbt its environment defaults.
$(VENV)/.installed: requirements.txt python_hooks/project/env.py $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m python_hooks write-pth
	@touch $@

# The jars pinned in jars/pom.xml (Iceberg, S3A), from Maven Central into jars/lib/, again when the pom
# changes; the folder is emptied first so that an older version never stays on the class path.
JARS := jars/lib
$(JARS)/.installed: jars/pom.xml
	@command -v mvn >/dev/null || { echo "mvn not found: on Debian/Ubuntu: sudo apt-get install -y maven"; exit 1; }
	rm -rf $(JARS)
	mvn -q -B -Dstyle.color=never -f jars/pom.xml dependency:copy-dependencies
	@touch $@

# The embedded driver JVM's class archive (python_hooks/project/jvm_classes.py): made once a JVM can start
# (Java, the venv, the jars), again when either changes; a new process then maps Spark's classes from it
# instead of loading them from the jars (about 3 s of every JVM's start). Without Java, or if it fails, it says
# so in one line and every JVM starts as before.
$(VENV)/cdc-jvm/.made: $(VENV)/.installed $(JARS)/.installed
	@if command -v java >/dev/null; then $(BIN)/python -m python_hooks jvm-classes; \
	else echo "jvm-classes: no java on the PATH: JVMs start without the class archive (with Java: make jvm-classes)"; fi
	@mkdir -p $(@D) && touch $@

install: $(VENV)/.installed $(JARS)/.installed $(VENV)/cdc-jvm/.made

# The class archive made again (after a JDK upgrade: Java skips an archive of another build without a word).
jvm-classes: $(VENV)/.installed $(JARS)/.installed check-java
	$(BIN)/python -m python_hooks jvm-classes
	@touch $(VENV)/cdc-jvm/.made

check-java:
	@command -v java >/dev/null || { \
	  echo "Java not found: Spark needs a JDK 17. On Debian/Ubuntu: sudo apt-get install -y openjdk-17-jre-headless"; \
	  exit 1; }

# Debian packages: JDK 17 for Spark, Maven for the jars, Chromium for the docs-site browser test, PostgreSQL and its
# JDBC driver for the cluster target (cluster-packages). Root or sudo; only what is missing.
system-packages: cluster-packages
	@pkgs=""; command -v java >/dev/null || pkgs="$$pkgs openjdk-17-jre-headless"; \
	command -v chromium >/dev/null || pkgs="$$pkgs chromium"; \
	command -v mvn >/dev/null || pkgs="$$pkgs maven"; \
	if [ -n "$$pkgs" ]; then \
	  sudo=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  echo "installing Debian packages:$$pkgs"; \
	  $$sudo apt-get update -qq && $$sudo apt-get install -y -qq --no-install-recommends $$pkgs; \
	fi

cluster-packages:
	@pkgs=""; ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || pkgs="$$pkgs postgresql"; \
	test -f /usr/share/java/postgresql.jar || pkgs="$$pkgs libpostgresql-jdbc-java"; \
	if [ -n "$$pkgs" ]; then \
	  sudo=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  echo "installing Debian packages:$$pkgs"; \
	  $$sudo apt-get update -qq && $$sudo apt-get install -y -qq --no-install-recommends $$pkgs; \
	fi

# The shared target on this machine (python_hooks/cluster/); ports, memory and folders from
# CDC_* variables (docs/cluster.md).
cluster-up: install check-java cluster-packages
	CDC_TARGET=cluster $(BIN)/python -m python_hooks cluster up

cluster-down: install
	CDC_TARGET=cluster $(BIN)/python -m python_hooks cluster down

cluster-status: install
	@CDC_TARGET=cluster $(BIN)/python -m python_hooks cluster status

# A local S3 server (python_hooks/objectstore/; docs/storage.md): port, bucket and keys from
# CDC_S3_PORT, CDC_S3_BUCKET, AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY.
s3-up: install
	$(BIN)/python -m python_hooks s3 up

s3-down: install
	$(BIN)/python -m python_hooks s3 down

s3-status: install
	@$(BIN)/python -m python_hooks s3 status

# A live PostgreSQL source captured by Debezium's embedded engine (python_hooks/live/, docs/live.md);
# port, folder and file rolling from CDC_LIVE_* variables. live-up is harmless twice.
live-up: install check-java cluster-packages
	$(BIN)/python -m python_hooks live pg-up --demo-schema
	$(BIN)/python -m python_hooks live workload --only-seed
	$(BIN)/python -m python_hooks live capture --detach

live-workload: install
	$(BIN)/python -m python_hooks live workload --rounds $(or $(ROUNDS),20)

live-drain: install
	$(BIN)/python -m python_hooks live drain

live-down: install
	$(BIN)/python -m python_hooks live capture-stop
	$(BIN)/python -m python_hooks live pg-down

live-status: install
	@$(BIN)/python -m python_hooks live status

# The live source end to end (python_hooks/commands/live_demo.py): a fresh live database, the loop every EVERY seconds
# while a workload of MINUTES runs, then `live compare` and the latency; everything it started is stopped at the end.
demo-live: install check-java cluster-packages
	$(BIN)/python -m python_hooks live demo --every $(or $(EVERY),10) --minutes $(or $(MINUTES),2) \
	  --downstream-every $(or $(DOWNSTREAM_EVERY),300)

# The live capture's tests alone (make test runs them too): no Spark.
test-live: install check-java cluster-packages
	$(BIN)/python -m pytest tests/pytest/test_live_capture.py tests/pytest/unit/test_live_sink.py --durations=5

demo: install check-java
	CDC_SAMPLE_TIMES=now $(BIN)/python -m sample_data.demo

run: install check-java
	$(BIN)/python -m python_hooks run

# Exit status 1 when a table's newest batch was refused or its lag passes its freshness error_after.
status: install check-java
	$(BIN)/python -m python_hooks status $(if $(PLOT),--plot $(PLOT))

# Table maintenance (python_hooks/commands/maintain.py, docs/schedule.md); CDC_TARGET=cluster beside the scheduler.
maintain: install check-java
	$(BIN)/python -m python_hooks maintain

# The test tiers (docs/tests.md). Markers say what a test needs (pytest.ini; tests/pytest/conftest.py sets them).
#   test-fast  no JVM, no server: lint, then the unit tests and the lint rules' tests
#   test       everything but the long suites, as two pytest processes side by side (scripts/test_groups.py):
#              `servers` (the cluster, the S3 server, the live source, the browser, the project's commands as
#              processes, the fuzz modules) and `embedded` (the rest: the embedded SparkSession in this process);
#              each pays once for what its tests share. TEST_GROUPS_PARALLEL=0 runs them one after the other.
#   test-all   also the long suites: the whole adapter suite, make faults, make fuzz and a short soak
LONG_SUITES := faults_full or adapter_suite_full or fuzz_full or nightly
SERVERS := cluster or s3 or live or browser or subprocess
# make test's servers process also runs the fuzz modules on Spark: without them it ends about 12 minutes before the
# embedded one on the 2-core machine (docs/tests.md), one core then idle.
SERVERS_GROUP := $(SERVERS) or fuzz
PYTEST_ARGS ?=

test-fast: install
	$(MAKE) --no-print-directory lint
	$(BIN)/python -m pytest tests/pytest/unit tests/pytest/test_lint.py -m "not ($(LONG_SUITES))" -q --durations=10 $(PYTEST_ARGS)

test: install check-java cluster-packages
	$(BIN)/python scripts/test_groups.py "servers=($(SERVERS_GROUP)) and not ($(LONG_SUITES))" \
	  "embedded=not ($(SERVERS_GROUP)) and not ($(LONG_SUITES))" -- $(PYTEST_ARGS)

# One group of make test alone (what the GitHub workflow's jobs run): the embedded SparkSession's tests; the
# cluster's, the S3 server's and the project's commands as processes; the live source's and the browser's.
test-embedded: install check-java
	$(BIN)/python -m pytest tests/pytest -m "not ($(SERVERS)) and not ($(LONG_SUITES))" --durations=25 $(PYTEST_ARGS)

test-servers: install check-java cluster-packages
	$(BIN)/python -m pytest tests/pytest -m "(cluster or s3 or subprocess) and not (live or browser) and not ($(LONG_SUITES))" \
	  --durations=25 $(PYTEST_ARGS)

test-live-browser: install check-java cluster-packages
	$(BIN)/python -m pytest tests/pytest -m "(live or browser) and not ($(LONG_SUITES))" --durations=25 $(PYTEST_ARGS)

# make test, the long suites and a short soak (3 tables, an hour of runs, one kill): the nightly tier. Every part
# runs even when one before it failed (a failing test must not hide what faults or fuzz would find); the parts
# that failed are named at the end, and then it fails.
test-all: install check-java cluster-packages
	@failed=""; \
	$(BIN)/python scripts/test_groups.py "servers=($(SERVERS_GROUP)) and not (faults_full or fuzz_full)" \
	  "embedded=not ($(SERVERS_GROUP)) and not (faults_full or fuzz_full)" -- $(PYTEST_ARGS) || failed="$$failed tests"; \
	$(MAKE) --no-print-directory faults || failed="$$failed faults"; \
	$(MAKE) --no-print-directory fuzz || failed="$$failed fuzz"; \
	SOAK_TABLES=3 SOAK_MINUTES=60 SOAK_MAINTAIN_EVERY=30 SOAK_KILL_RUNS=5 SOAK_WORK=$(CURDIR)/target/soak-short \
	  $(MAKE) --no-print-directory soak || failed="$$failed soak"; \
	if [ -n "$$failed" ]; then echo "test-all: failed:$$failed (each part's output above)"; exit 1; fi; \
	echo "test-all: tests, faults, fuzz and the short soak passed"

# dbt Labs' adapter test suite with the project's macros (tests/pytest/adapter_suite/, docs/models.md), every class of it; make test runs it too, but for the classes marked adapter_suite_full.
test-adapter: install check-java
	$(BIN)/python -m pytest tests/pytest/adapter_suite --durations=20

# The same suite on the cluster target: a cluster of its own (warehouse on a local S3 server), stopped after.
test-adapter-cluster: install check-java cluster-packages
	ADAPTER_SUITE_TARGET=cluster $(BIN)/python -m pytest tests/pytest/adapter_suite --durations=20

# Every kill point on the embedded target (tests/pytest/test_faults.py; make test runs its smoke subset), then
# on the shared target: the kill points and the cluster's own faults (tests/pytest/test_faults_cluster.py, a
# cluster of its own on a local S3 server, stopped after). Recovery seconds: target/faults/report.jsonl.
faults: install check-java cluster-packages
	$(BIN)/python -m pytest tests/pytest/test_faults.py
	$(BIN)/python -m pytest tests/pytest/test_faults_cluster.py --durations=20

# Damaged raw files (tests/pytest/fuzz/, docs/operations.md): hypothesis on the Python side with FUZZ_EXAMPLES
# cases (fresh random ones each time), then every recipe of the corpus through Spark, then FUZZ_SEQUENCES fresh
# sequences of runs (hypothesis.stateful: tests/pytest/fuzz/sequences.py); make test runs a smoke subset of each.
fuzz: install check-java
	rm -f data/fuzz-python.jsonl data/fuzz-spark.jsonl data/fuzz-sequences.jsonl; mkdir -p data
	FUZZ_EXAMPLES=$(or $(FUZZ_EXAMPLES),20000) FUZZ_RANDOM=1 FUZZ_REPORT=data/fuzz-python.jsonl \
	  $(BIN)/python -m pytest tests/pytest/unit/test_fuzz_raw_files.py --hypothesis-show-statistics -q
	FUZZ_REPORT=data/fuzz-spark.jsonl $(BIN)/python -m pytest tests/pytest/test_fuzz_pipeline.py --durations=10
	FUZZ_SEQUENCES=$(or $(FUZZ_SEQUENCES),25) FUZZ_REPORT=data/fuzz-sequences.jsonl \
	  $(BIN)/python -m pytest tests/pytest/test_fuzz_sequences.py --durations=5
	PYTHONPATH=tests/pytest $(BIN)/python -m fuzz.figures data/fuzz-python.jsonl data/fuzz-spark.jsonl \
	  data/fuzz-sequences.jsonl

# A simulated day (tests/pytest/soak/, docs/performance.md): SOAK_TABLES=20 tables, SOAK_MINUTES=1440, a run every
# SOAK_RUN_EVERY=5 (SOAK_KILL_RATE=0.01 of them killed), maintain every SOAK_MAINTAIN_EVERY=60; report in SOAK_WORK.
soak: install check-java
	PYTHONPATH=.:tests/pytest $(BIN)/python -m soak

# The benchmark (bench/README.md): 5M rows and 1% batches by default; BENCH_ROWS etc. to scale it.
bench: install check-java
	$(BIN)/python -m bench

# M and Z at a team's scale: 200 tables of 10,000 rows, 100 changes each (bench/results/scale/latest.md).
bench-scale: install check-java
	BENCH_STAGES=many,idle BENCH_MANY_TABLES=200 BENCH_MANY_ROWS=10000 BENCH_MANY_BATCH=100 \
	  BENCH_RESULTS=$(CURDIR)/bench/results/scale $(BIN)/python -m bench

# The same with landing and warehouse on a local S3 server the bench starts and stops (bench/results/latest-s3.md).
bench-s3: install check-java
	BENCH_STORAGE=s3 $(BIN)/python -m bench

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check --diff .
	$(BIN)/lint-imports --no-cache
	$(BIN)/sqlfluff lint $(SQL_PATHS)
	@if git rev-parse --git-dir >/dev/null 2>&1; then \
	  SKIP=ruff-check,ruff-format,sqlfluff-lint $(BIN)/pre-commit run --all-files --show-diff-on-failure; \
	else echo "not a git checkout: pre-commit hooks skipped"; fi

# In one process (python_hooks/commands/docs.py): dbt parse, dbt docs generate --no-compile --static (models
# render SQL from raw files at execute time; lineage/docs come from dbt parse), the live row count of
# every table into the catalog, then the coverage check (scripts/check_docs_coverage.py). Then the manual
# (docs/, mkdocs.yml): its references generated from the code (scripts/docs_reference.py), built into target/manual/.
docs: install check-java
	$(BIN)/python -m python_hooks docs
	$(BIN)/python -m scripts.docs_reference
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir $(or $(DBT_TARGET_PATH),target)/manual
	@echo "docs: the manual $(or $(DBT_TARGET_PATH),target)/manual/index.html (docs/, mkdocs.yml)"

docs-serve: install
	@test -f target/index.html -a -f target/manifest.json || $(MAKE) docs
	$(BIN)/dbt docs serve --port $(DOCS_PORT) --no-browser

clean:
	@if ls data/cluster/run/*.pid >/dev/null 2>&1; then \
	  echo "the cluster under data/cluster was started (PID files in data/cluster/run): make cluster-down first"; exit 1; fi
	@if ls data/live/run/*.pid data/live/capture/*.pid >/dev/null 2>&1; then \
	  echo "the live source under data/live was started (PID files in data/live): make live-down first"; exit 1; fi
	rm -rf data target logs
