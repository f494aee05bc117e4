# Two commands do all set-up on a fresh machine:
#   make serve   creates .venv, installs the service, starts it on SQLite (./data/slowave.db)
#   make test    installs what the tests need (Python and npm), lints the protos, runs every test
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: serve test test-fast install lint format lint-proto breaking-proto clean bench-quality bench-scale bench-perf model bench-locomo

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# Reinstalling regenerates the protobuf stubs (build hook), so they never go stale.
# The default semantic channel (static embeddings shipped in server/slowave/embedding_model/) is
# part of the service itself and needs no torch. The test install adds the optional [semantic]
# extra too (SLOWAVE_SEMANTIC=minilm, tests/integration/test_semantic_minilm.py); torch is pinned
# first to the CPU build this machine kind keeps on disk (an unpinned resolve would fetch a
# multi-GB CUDA build).
TORCH := torch==2.13.0
$(STAMP): $(BIN)/python pyproject.toml $(shell find protos server -name '*.proto' -o -name '*.py' -path '*migrations*')
	$(BIN)/pip install -q '$(TORCH)'
	$(BIN)/pip install -q -e '.[test,semantic,mcp]'
	touch $(STAMP)

# `make serve` needs only the service itself (hybrid retrieval included, no torch).
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

# Compatibility guard: the protos as they are now must not break those of the previous commit
# (`buf breaking`, the FILE rules of buf.yaml), nor those of HEAD when protos/ or buf.yaml have
# uncommitted edits. Skipped, saying so, only where there is no previous commit; a shallow clone
# lacking it fails. Another base: `make breaking-proto BREAKING_AGAINST=<rev>`.
BREAKING_AGAINST ?= HEAD~1
breaking-proto: node_modules/.package-lock.json
	@if [ ! -e .git ]; then echo "buf breaking: SKIPPED, not a git checkout (no earlier contract to compare with)"; \
	elif ! git rev-parse --git-dir >/dev/null; then echo "buf breaking: git cannot read this checkout" >&2; exit 1; \
	elif ! git rev-parse -q --verify 'HEAD^{commit}' >/dev/null; then echo "buf breaking: SKIPPED, no commit yet"; \
	else \
	  if [ -n "$$(git status --porcelain -- protos buf.yaml)" ]; then \
	    echo "buf breaking --against HEAD (uncommitted edits in protos/ or buf.yaml)"; \
	    npx --no-install buf breaking --against ".git#ref=$$(git rev-parse HEAD)" || exit 1; \
	  fi; \
	  if base=$$(git rev-parse -q --verify '$(BREAKING_AGAINST)^{commit}'); then \
	    echo "buf breaking --against $(BREAKING_AGAINST) ($$base)"; \
	    npx --no-install buf breaking --against ".git#ref=$$base" || exit 1; \
	  elif [ "$$(git rev-parse --is-shallow-repository)" = true ]; then \
	    echo "buf breaking: $(BREAKING_AGAINST) is not in this shallow clone; deepen it (git fetch --deepen=1) or clone in full" >&2; exit 1; \
	  else echo "buf breaking: SKIPPED, $(BREAKING_AGAINST) does not exist (HEAD is the first commit)"; fi; \
	fi

# The Node.js client (clients/node) and its pinned dependencies, for tests/integration/test_node_client.py.
clients/node/node_modules/.package-lock.json: clients/node/package.json clients/node/package-lock.json
	npm ci --prefix clients/node --no-audit --no-fund --ignore-scripts

# The TypeScript client (clients/ts): protobuf-es, connect-node, tsc; for tests/integration/test_ts_client.py
# and the code generation of buf.gen.yaml (its protoc-gen-es).
clients/ts/node_modules/.package-lock.json: clients/ts/package.json clients/ts/package-lock.json
	npm ci --prefix clients/ts --no-audit --no-fund --ignore-scripts

# The whole suite on SQLite, then everything that talks to a database again on a PostgreSQL cluster
# the run starts itself from the machine's binaries (skipped, loudly, where they are missing).
# Python style and correctness (ruff's checks and its formatter; `make format` rewrites), types
# (mypy, strict, on the rules and the SDK: pyproject.toml [tool.mypy]), and the layering
# (import-linter: pyproject.toml [tool.importlinter]).
PY_SOURCES := server clients tests bench tools
TYPED      := server/slowave/domain clients/python/slowave_client
lint: install
	$(BIN)/ruff check $(PY_SOURCES)
	$(BIN)/ruff format --check $(PY_SOURCES)
	$(BIN)/mypy $(TYPED)
	PYTHONPATH=server:clients/python $(BIN)/lint-imports --no-cache

# The rules and the SDK without a server or a database: under a minute, for the edit-test loop.
test-fast: install
	$(BIN)/python -m pytest tests/unit -q

format: install
	$(BIN)/ruff check --fix $(PY_SOURCES)
	$(BIN)/ruff format $(PY_SOURCES)

test: install lint lint-proto breaking-proto clients/node/node_modules/.package-lock.json clients/ts/node_modules/.package-lock.json
	$(BIN)/python -m pytest
	SLOWAVE_TEST_BACKEND=postgresql $(BIN)/python -m pytest tests/integration

# Retrieval-quality benchmark (full run, lexical and semantic, learning curves), LoCoMo (dev half,
# when ../shared/data/locomo-dev exists), then the Activate latency at 1k / 10k / 100k memories:
# writes bench/results/quality.{md,png}, locomo.md and scale.md.
LOCOMO_DATA := ../shared/data/locomo-dev
bench-quality: install
	$(BIN)/pip install -q -e '.[bench]'
	$(BIN)/python bench/quality.py
	@if [ -d $(LOCOMO_DATA) ]; then echo "$(BIN)/python bench/locomo.py"; $(BIN)/python bench/locomo.py; \
	else echo "bench/locomo.py: SKIPPED, no LoCoMo data at $(LOCOMO_DATA)"; fi
	$(BIN)/python bench/scale.py

# Only the Activate latency at 1k / 10k / 100k memories in one scope: writes bench/results/scale.md.
bench-scale: install
	$(BIN)/python bench/scale.py

# Only LoCoMo (dev half, ../shared/data/locomo-dev) through the real gRPC API: writes bench/results/locomo.md.
# More with e.g. `make bench-locomo LOCOMO_ARGS='--baseline --learn --rounds 1,3'` (see bench/locomo.py).
bench-locomo: install
	$(BIN)/pip install -q -e '.[bench]'
	$(BIN)/python bench/locomo.py $(LOCOMO_ARGS)

# Per-RPC latency, full-cycle throughput against a bare gRPC echo, batch Remember and server memory at
# 1k / 10k / 100k memories (≈ 15 min; preloaded stores are cached in bench/.cache/): writes
# bench/results/perf.{md,png}. `$(BIN)/python bench/perf.py --quick` is the few-minute version.
bench-perf: install
	$(BIN)/pip install -q -e '.[bench]'
	$(BIN)/python bench/perf.py

# Rebuilds the static embedding model in server/slowave/embedding_model/ from the packaged
# all-MiniLM-L6-v2 (tools/distill_model.py: ≈ 35 min on 2 cores, ≈ 11 once the teacher's embeddings
# of the corpus are cached in .venv-model/cache) in its own virtualenv: torch is pinned first to
# the CPU build (an unpinned resolve would fetch a multi-GB CUDA build), then the rest of
# tools/model-requirements.txt. Compare the new PROVENANCE.json with the committed one.
MODEL_VENV := .venv-model
$(MODEL_VENV)/.installed: tools/model-requirements.txt
	$(PYTHON) -m venv $(MODEL_VENV)
	$(MODEL_VENV)/bin/pip install -q --upgrade pip
	$(MODEL_VENV)/bin/pip install -q '$(TORCH)'
	$(MODEL_VENV)/bin/pip install -q -r tools/model-requirements.txt
	touch $@

model: $(MODEL_VENV)/.installed
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(MODEL_VENV)/bin/python tools/distill_model.py

clean:
	rm -rf $(VENV) node_modules clients/node/node_modules data .pytest_cache
