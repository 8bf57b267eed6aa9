# `make test` and `make demo` do all set-up themselves: they create (or reuse)
# .venv, install the package with its test extras, then run.
# The install goes through uv (itself pip-installed into the venv, a few seconds): with
# bytecode compiled as pip would, 15 s where pip takes 48 on two cores. uv reads no pip
# configuration, so where it cannot reach an index (a mirror only pip is told of, no
# network) pip installs instead.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.tilth-installed

.PHONY: venv test test-slow test-postgres demo lint bench clean live-deps test-live

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11+ is required")'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet uv && \
	$(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python -e '.[test]' || { \
	echo "uv could not install the package; installing it with pip instead" >&2; \
	$(BIN)/python -m pip install --quiet --upgrade pip && \
	$(BIN)/python -m pip install --quiet -e '.[test]'; }
	@touch $(STAMP)

# The venv alone (.ci/run makes it once before running several targets at the same time).
venv: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check tilth tests benchmarks
	$(BIN)/ruff format --check tilth tests benchmarks
	$(BIN)/mypy

# --durations: every run (CI's included) names its slowest tests, where the suite's time goes.
test: lint
	@$(BIN)/python -m pytest -q --durations=30; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing on purpose"; fi; \
	exit $$rc

# The durable queue against a real PostgreSQL server (initdb in a temporary directory, on
# loopback; Debian's postgresql package). Under CI=true a missing server fails, never skips.
# The suite's slowest end-to-end tests (best of N with killed workers, Ctrl-C, a browser).
test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 -m slow tests/attempts tests/web/test_attempts_view.py

test-postgres: $(STAMP)
	$(BIN)/python -m pytest -q -n 0 -m postgres tests/postgres

# The live tier (tests/live): llama.cpp's llama-server and a small model, built and fetched once
# into ~/.cache/tilth/live (tests/live/deps.py), then Tilth against them. Not part of `make test`.
live-deps: $(STAMP)
	$(BIN)/python -m tests.live.deps

test-live: live-deps
	@$(BIN)/python -m pytest -q -n 0 --durations=0 tests/live; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no live tests: failing on purpose"; fi; \
	exit $$rc

demo: $(STAMP)
	$(BIN)/tilth demo

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
