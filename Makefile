# One task runner; CI (.ci/run) runs `make check` exactly as the README says.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin

.PHONY: install check lint types guard trace schemas docs test test-fast test-all bench demo clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# Installed once per change of the dependencies or the version (pyproject.toml, kernel/__init__),
# not before every target: the stamp saves each `make test-fast` the seconds pip takes to
# find nothing to do.
$(VENV)/.installed: pyproject.toml src/kernel/__init__.py | $(PY)
	$(PY) -m pip install --quiet -e '.[dev,testing]'
	touch $@

install: $(VENV)/.installed

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

# The pure core's own tests under the dynamic guard (`kernel.guard.trace`, ADR-0001):
# a forbidden run-time event (an open, a process, a socket, a forbidden import) with a
# pure module on the stack fails the build, though every test passes. Properties run
# with fewer examples: `make test` already ran them in full; this run looks for events.
# A test file for a new pure module joins this list.
PURE_TESTS := tests/test_altered_records.py tests/test_binding.py \
	tests/test_binding_api_boundary.py tests/test_binding_branches.py \
	tests/test_binding_fixtures.py tests/test_codec.py tests/test_codec_branches.py \
	tests/test_codec_digests.py tests/test_codec_paths.py tests/test_codec_rules.py \
	tests/test_commit_admission.py tests/test_consensus.py tests/test_consensus_branches.py \
	tests/test_contract.py tests/test_decision.py tests/test_evidence_report.py \
	tests/test_exceptions.py tests/test_field_kinds.py tests/test_gate.py \
	tests/test_identity.py tests/test_idkmesh.py tests/test_idkmesh_branches.py \
	tests/test_ledger.py tests/test_ledger_merkle.py tests/test_raises_documented.py \
	tests/test_refusal_explanations.py tests/test_render.py tests/test_render_branches.py \
	tests/test_render_decision.py tests/test_run_admission_branches.py \
	tests/test_run_replay.py tests/test_runrecord.py tests/test_runrecord_branches.py \
	tests/test_search.py tests/test_search_branches.py tests/test_strategies_paths.py \
	tests/test_strategies_seeded.py tests/test_suite.py tests/test_values.py \
	tests/test_values_branches.py tests/test_verification.py

trace: install
	$(BIN)/pytest -q -p no:cacheprovider --hypothesis-profile kernel-fast --kernel-guard-trace $(PURE_TESTS)

schemas: install
	$(PY) -m kernel.effects.schemas --check
	$(PY) -m kernel.effects.identity_docs --check
	$(PY) -m kernel.effects.api_stub --check

# The API reference, built from the docstrings; any warning fails the build (-E: every
# page is re-read, so a docstring change is never hidden by a cached page).
docs: install
	$(BIN)/sphinx-build -E -W --keep-going -q -b html docs docs/_build/html

check: lint types guard schemas docs test trace

# The fast lane (under a minute on an idle machine): no test that starts a process or a
# sandbox, properties with fewer examples. `make check` runs everything.
test-fast: install
	$(BIN)/pytest -q -n auto --fast-lane -m "not processes and not slow" --hypothesis-profile kernel-fast

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
