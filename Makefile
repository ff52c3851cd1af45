# carpool: every target goes through `setup`, which is idempotent and creates .venv/.
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION := 1
export PYTHONPATH := $(CURDIR)/shared:$(CURDIR)

.PHONY: setup demo test bench synth lint layer-lock clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	@$(BIN)/python -m pip install -q --upgrade pip
	@$(BIN)/python -m pip install -q -e '.[dev]'
	@touch $(STAMP)

demo: setup
	$(BIN)/carpool simulate examples/flex-first.yaml

# integration and e2e each start local AWS servers and set AWS_* variables: separate processes keep
# the suites from sharing (and tearing down) each other's endpoints
test: setup
	$(BIN)/python -m pytest -n 2 --dist loadfile tests/unit tests/infra
	$(BIN)/python -m pytest -n 2 --dist loadfile tests/integration
	@# each scenario in its own process (sequential simulations in one process leak local-AWS state), two at
	@# a time on the two cores; xargs exits non-zero when any of them fails
	@ls tests/e2e/test_*.py | xargs -P 2 -n 1 $(BIN)/python -m pytest -p no:cacheprovider

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
