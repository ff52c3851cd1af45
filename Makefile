# carpool: every target goes through `setup`, which is idempotent and creates .venv/.
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION := 1
export PYTHONPATH := $(CURDIR)/shared:$(CURDIR)

.PHONY: setup demo test e2e-real conformance bench synth lint layer-lock clean

setup: $(STAMP)

# uv resolves and installs the same packages as pip, in parallel: about 20 s on a fresh machine instead of
# two minutes. Where uv cannot be installed, pip does the same work.
$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	@$(BIN)/python -m pip install -q uv || true
	@if test -x $(BIN)/uv; then \
		$(BIN)/uv pip install -q --python $(BIN)/python --upgrade pip && \
		$(BIN)/uv pip install -q --python $(BIN)/python -e '.[dev]'; \
	else \
		$(BIN)/python -m pip install -q --upgrade pip && $(BIN)/python -m pip install -q -e '.[dev]'; \
	fi
	@touch $(STAMP)

demo: setup
	$(BIN)/carpool simulate examples/flex-first.yaml

# One pytest process, two xdist workers taking a test file at a time: a simulation, and each integration
# module's local AWS, keep their state to themselves, so every suite shares the workers. The slowest
# files are handed out first (tests/conftest.py orders them), so that neither worker is left finishing a
# long one alone: `--no-loadscope-reorder` keeps that order (xdist would otherwise hand out the files with
# the most tests first, which puts the simulations, a few tests each, last).
test: setup
	$(BIN)/python -m pytest -n 2 --dist loadfile --no-loadscope-reorder tests/e2e tests/infra tests/integration \
		tests/unit tests/conformance

# The real-cluster tier (tests/realcluster/): carpool's handlers against a real etcd, kube-apiserver,
# kube-scheduler, kube-controller-manager and hollow kubelets, on the wall clock. It builds nothing: where a
# binary is missing it says what to build (README, "A real control plane") and every test skips. One file
# at a time: each starts its own control plane, and the machine's two cores are its kubelets'.
e2e-real: setup
	@$(BIN)/python -m tests.realcluster.controlplane --check || true
	$(BIN)/python -m pytest -rs tests/realcluster

# Karpenter's own scheduling and provider test cases, ported as data (tests/conformance/README.md)
conformance: setup
	@$(BIN)/python -m tests.conformance.runner

bench: setup
	$(BIN)/python -m bench

# The Lambda layer is built by the CDK app during synth (cached in build/layer-<digest>). After changing
# pyproject.toml's dependencies, re-resolve the layer's pinned, hashed dependency set:
layer-lock: setup
	$(BIN)/python -m infra.layer lock

CLUSTER ?= demo
synth: setup
	$(BIN)/python infra/app.py -c clusterName=$(CLUSTER)

lint: setup
	$(BIN)/ruff check shared/carpool functions infra tests bench
	$(BIN)/mypy shared/carpool

clean:
	rm -rf $(VENV) build cdk.out .pytest_cache
