# CDC lakehouse: dbt on an embedded Spark session with Apache Iceberg.
#   make demo   sample raw data, stage by stage, through the whole pipeline (the main job)
#   make run    the pipeline once over whatever is in $CDC_LANDING_ROOT (what a scheduler calls)
#   make test   every test
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin

# Paths are made absolute: Spark resolves a relative table location against the warehouse.
export DBT_PROFILES_DIR := $(CURDIR)/profiles
export CDC_LANDING_ROOT := $(abspath $(or $(CDC_LANDING_ROOT),data/landing))
export CDC_WAREHOUSE := $(abspath $(or $(CDC_WAREHOUSE),data/warehouse))

.PHONY: help install check-java system-packages demo run test bench lint docs docs-serve clean

SQL_PATHS := $(wildcard models snapshots tests analyses)
DOCS_PORT ?= 8080

help:
	@echo "make demo    write sample DMS/Debezium change files stage by stage and run the pipeline after each"
	@echo "make run     run the pipeline once on \$$CDC_LANDING_ROOT (default data/landing)"
	@echo "make test    run every test (pytest with real Spark + Iceberg, dbt data tests)"
	@echo "make lint    sqlfluff, ruff and the pre-commit checks"
	@echo "make docs    build the dbt docs site (target/index.html and target/static_index.html)"
	@echo "make docs-serve  serve it on http://localhost:$(DOCS_PORT)"
	@echo "make bench   the benchmark (bench/README.md)"
	@echo "make clean   remove run outputs (data/, target/, logs/)"

$(BIN)/python:
	@command -v $(PYTHON) >/dev/null || { echo "$(PYTHON) not found: install Python 3.11"; exit 1; }
	$(PYTHON) -m venv $(VENV)

# Re-installs when the pins change. The .pth start-up hook gives dbt its environment defaults.
$(VENV)/.installed: requirements.txt $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m python_hooks write-pth
	@touch $@

install: $(VENV)/.installed

check-java:
	@command -v java >/dev/null || { \
	  echo "Java not found: Spark needs a JDK 17. On Debian/Ubuntu: sudo apt-get install -y openjdk-17-jre-headless"; \
	  exit 1; }

# Debian packages: JDK 17 for Spark, Chromium for the docs-site browser test. Root or sudo.
system-packages:
	@pkgs=""; command -v java >/dev/null || pkgs="$$pkgs openjdk-17-jre-headless"; \
	command -v chromium >/dev/null || pkgs="$$pkgs chromium"; \
	if [ -n "$$pkgs" ]; then \
	  sudo=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  echo "installing Debian packages:$$pkgs"; \
	  $$sudo apt-get update -qq && $$sudo apt-get install -y -qq --no-install-recommends $$pkgs; \
	fi

demo: install check-java
	$(BIN)/python -m sample_data.demo

run: install check-java
	$(BIN)/python -m python_hooks run

test: install check-java
	$(BIN)/python -m pytest tests/pytest

# The benchmark (bench/README.md): 5M rows and 1% batches by default; BENCH_ROWS etc. to scale it.
bench: install check-java
	$(BIN)/python -m bench

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check --diff .
	$(BIN)/sqlfluff lint $(SQL_PATHS)
	@if git rev-parse --git-dir >/dev/null 2>&1; then \
	  SKIP=ruff-check,ruff-format,sqlfluff-lint $(BIN)/pre-commit run --all-files --show-diff-on-failure; \
	else echo "not a git checkout: pre-commit hooks skipped"; fi

# --no-compile: models render SQL from raw files at execute time; lineage/docs come from dbt parse.
docs: install check-java
	$(BIN)/dbt parse
	$(BIN)/dbt docs generate --no-compile --static
	$(BIN)/python scripts/check_docs_coverage.py target

docs-serve: install
	@test -f target/index.html -a -f target/manifest.json || $(MAKE) docs
	$(BIN)/dbt docs serve --port $(DOCS_PORT) --no-browser

clean:
	rm -rf data target logs
