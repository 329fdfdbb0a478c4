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

.PHONY: help install check-java demo run test clean

help:
	@echo "make demo    write sample DMS/Debezium change files stage by stage and run the pipeline after each"
	@echo "make run     run the pipeline once on \$$CDC_LANDING_ROOT (default data/landing)"
	@echo "make test    run every test (pytest with real Spark + Iceberg, dbt data tests)"
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

demo: install check-java
	$(BIN)/python -m sample_data.demo

run: install check-java
	$(BIN)/python -m python_hooks run

test: install check-java
	$(BIN)/python -m pytest tests/pytest

clean:
	rm -rf data target logs
