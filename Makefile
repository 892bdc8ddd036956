# One task runner; CI (.ci/run) runs `make check` exactly as the README says.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin

.PHONY: install check lint types guard schemas docs test test-fast test-all bench demo clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

install: $(PY)
	$(PY) -m pip install --quiet -e '.[dev,testing]'

lint: install
	$(BIN)/ruff check src tests bench docs/examples noxfile.py
	$(BIN)/ruff format --check src tests bench docs/examples noxfile.py

types: install
	$(BIN)/mypy

# The pure core (everything but the effect shell, the guard's file reading and the
# `python -m kernel` entry) is held at 100% branch coverage; the effect shell at the
# pyproject floor (its sandbox helper and self-test runner run in child processes).
PURE_CORE := */kernel/*.py,*/kernel/records/*,*/kernel/search/*,*/kernel/run/*,*/kernel/corroboration/*,*/kernel/decide/*,*/kernel/views/*,*/kernel/importers/*,*/kernel/strategies/*

test: install
	$(BIN)/pytest -q --cov=kernel --cov-report=term:skip-covered
	$(BIN)/coverage report --include='$(PURE_CORE)' --omit='*/kernel/__main__.py' \
		--fail-under=100 --show-missing --skip-covered

guard: install
	$(BIN)/kernel guard

schemas: install
	$(PY) -m kernel.effects.schemas --check
	$(PY) -m kernel.effects.identity_docs --check
	$(PY) -m kernel.effects.api_stub --check

# The API reference, built from the docstrings; any warning fails the build (-E: every
# page is re-read, so a docstring change is never hidden by a cached page).
docs: install
	$(BIN)/sphinx-build -E -W --keep-going -q -b html docs docs/_build/html

check: lint types guard schemas docs test

# The fast lane (under a minute on an idle machine): no test that starts a process or a
# sandbox, properties with fewer examples. `make check` runs everything.
test-fast: install
	$(BIN)/pytest -q --fast-lane -m "not processes and not slow" --hypothesis-profile kernel-fast

test-all: install
	$(BIN)/nox

# Benches print figures (and PASS/MISS against the issues' targets); a MISS is a
# finding to report, not a build failure, so every bench runs.
bench: install
	-$(PY) bench/identity.py
	-$(PY) bench/sandbox.py --quick
	-$(PY) bench/guard.py
	-$(PY) bench/report.py
	-$(PY) bench/binding.py
	-$(PY) bench/run.py --quick
	-$(PY) bench/ledger.py

demo: install
	$(BIN)/kernel run --config fixtures/demo/config.json --output-dir results/demo

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis .nox
