# Two commands do all set-up on a fresh machine:
#   make serve   creates .venv, installs the service, starts it on SQLite (./data/slowave.db)
#   make test    installs what the tests need (Python and npm), lints the protos, runs every test
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: serve test install lint-proto clean bench-quality bench-scale

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# Reinstalling regenerates the protobuf stubs (build hook), so they never go stale.
# The test install includes the semantic channel; torch is pinned first to the CPU build this
# machine kind keeps on disk (an unpinned resolve would fetch a multi-GB CUDA build).
TORCH := torch==2.13.0
$(STAMP): $(BIN)/python pyproject.toml $(shell find protos server -name '*.proto' -o -name '*.py' -path '*migrations*')
	$(BIN)/pip install -q '$(TORCH)'
	$(BIN)/pip install -q -e '.[test,semantic]'
	touch $(STAMP)

# `make serve` needs only the service itself.
$(VENV)/.service: $(BIN)/python pyproject.toml $(shell find protos -name '*.proto')
	$(BIN)/pip install -q -e .
	touch $(VENV)/.service

install: $(STAMP)

serve: $(VENV)/.service
	$(BIN)/slowave-server

node_modules/.package-lock.json: package.json package-lock.json
	npm ci --no-audit --no-fund

lint-proto: node_modules/.package-lock.json
	npx --no-install buf lint

# The whole suite on SQLite, then everything that talks to a database again on a PostgreSQL cluster
# the run starts itself from the machine's binaries (skipped, loudly, where they are missing).
test: install lint-proto
	$(BIN)/python -m pytest
	SLOWAVE_TEST_BACKEND=postgresql $(BIN)/python -m pytest tests/integration

# Retrieval-quality benchmark (full run, lexical and semantic, learning curves) followed by the
# Activate latency at 1k / 10k / 100k memories: writes bench/results/quality.{md,png} and scale.md.
bench-quality: install
	$(BIN)/pip install -q -e '.[bench]'
	$(BIN)/python bench/quality.py
	$(BIN)/python bench/scale.py

# Only the Activate latency at 1k / 10k / 100k memories in one scope: writes bench/results/scale.md.
bench-scale: install
	$(BIN)/python bench/scale.py

clean:
	rm -rf $(VENV) node_modules data .pytest_cache
