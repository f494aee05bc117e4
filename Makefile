# Two commands do all set-up on a fresh machine:
#   make serve   creates .venv, installs the service, starts it on SQLite (./data/slowave.db)
#   make test    installs what the tests need (Python and npm), lints the protos, runs every test
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: serve test install lint-proto clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# Reinstalling regenerates the protobuf stubs (build hook), so they never go stale.
$(STAMP): $(BIN)/python pyproject.toml $(shell find protos server -name '*.proto' -o -name '*.py' -path '*migrations*')
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

serve: install
	$(BIN)/slowave-server

node_modules/.package-lock.json: package.json package-lock.json
	npm ci --no-audit --no-fund

lint-proto: node_modules/.package-lock.json
	npx --no-install buf lint

test: install lint-proto
	$(BIN)/python -m pytest

clean:
	rm -rf $(VENV) node_modules data .pytest_cache
