# gangweb: `make run` sets up and runs everything on a laptop; `make test` sets up and runs the whole suite.
SHELL := /bin/bash
PY ?= python3
VENV := .venv
PYTHON := $(VENV)/bin/python
STAMP := $(VENV)/.requirements-$(shell cat requirements.txt requirements-dev.txt client/pyproject.toml | sha1sum | cut -c1-12)
# `make run` needs only the server's requirements and the CLI, not the test tools (playwright, schemathesis, ...).
RUN_STAMP := $(VENV)/.run-requirements-$(shell cat requirements.txt client/pyproject.toml | sha1sum | cut -c1-12)
PYTEST_ARGS ?=
# Kubernetes releases of the local control plane (localcluster/versions.env), default first: 1.37.2, then 1.36.3.
# `make run` builds and runs the default. `make test` builds every release, runs the whole suite on the default
# (tests marked for another minor, `@pytest.mark.k8s_version("1.36")`, are deselected there), and on each other
# release only the tests marked `k8s_version` (the v1alpha2 plugin, the 1.36 facts, and the in-place upgrade from
# that release to the default, which starts clusters of its own). `make test-k8s-other` is that second part alone.
K8S_VERSIONS := $(shell . localcluster/versions.env && echo $$K8S_VERSIONS)
K8S_DEFAULT := $(firstword $(K8S_VERSIONS))
K8S_OTHERS := $(wordlist 2,$(words $(K8S_VERSIONS)),$(K8S_VERSIONS))

.PHONY: run test test-k8s-other setup venv venv-run migrate localcluster-build lint bench clean-state screenshots

$(STAMP): requirements.txt requirements-dev.txt client/pyproject.toml
	@test -x $(PYTHON) || $(PY) -m venv $(VENV)
	$(PYTHON) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	@rm -f $(VENV)/.requirements-* && touch $(STAMP)

venv: $(STAMP)

$(RUN_STAMP): requirements.txt client/pyproject.toml
	@test -x $(PYTHON) || $(PY) -m venv $(VENV)
	$(PYTHON) -m pip install --quiet --disable-pip-version-check -r requirements.txt -e ./client
	@rm -f $(VENV)/.run-requirements-* && touch $(RUN_STAMP)

venv-run: $(RUN_STAMP)

# Every release of versions.env, built at once (a warm cache returns in about a second); LOCALCLUSTER_BUILD_ARGS=
# "--k8s-version 1.37.2" builds only one.
LOCALCLUSTER_BUILD_ARGS ?= --all
localcluster-build:
	bash localcluster/build.sh $(LOCALCLUSTER_BUILD_ARGS)

migrate: venv-run
	@mkdir -p var
	DEBUG=1 $(PYTHON) manage.py migrate --noinput

setup: venv migrate

run: venv-run migrate
	@bash localcluster/build.sh --k8s-version $(K8S_DEFAULT) || echo "make run: local cluster build failed; starting without it"
	DEBUG=1 GANGWEB_METRICS_PUBLIC=$${GANGWEB_METRICS_PUBLIC:-1} $(PYTHON) manage.py runstack

# scripts/test-suite.sh: the build beside the tests that need none of its binaries, then the tests that need it on
# xdist workers (a control plane each), beside the k8s_version tests on the other releases. Every part runs even when
# an earlier one failed; the target fails when any did.
test: venv
	bash scripts/ensure-test-deps.sh
	PYTHON=$(PYTHON) PYTEST_ARGS="$(PYTEST_ARGS)" bash scripts/test-suite.sh

# The version-specific tests on each release other than the default (1.36.3): those marked k8s_version for it,
# and the in-place upgrades from it to the default (GANGWEB_K8S_UPGRADE_TO).
test-k8s-other: venv localcluster-build
	bash scripts/ensure-test-deps.sh
	status=0; for v in $(K8S_OTHERS); do \
	  GANGWEB_TESTING=1 GANGWEB_K8S_VERSION=$$v GANGWEB_K8S_UPGRADE_TO=$(K8S_DEFAULT) \
	    $(PYTHON) -m pytest -m k8s_version tests/cluster $(PYTEST_ARGS) || status=$$?; \
	done; exit $$status

lint: venv
	$(PYTHON) -m ruff check .

bench: venv localcluster-build
	$(PYTHON) -m bench.run_all

clean-state:
	rm -rf var

# Refresh the README's screenshots (docs/screenshots/*.png) from the browser tests' demo data.
screenshots: venv
	bash scripts/ensure-test-deps.sh
	GANGWEB_UPDATE_SCREENSHOTS=1 GANGWEB_TESTING=1 $(PYTHON) -m pytest tests/ui/test_screenshots.py -q
