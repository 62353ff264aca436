# gangweb: `make run` sets up and runs everything on a laptop; `make test` sets up and runs the whole suite.
SHELL := /bin/bash
PY ?= python3
VENV := .venv
PYTHON := $(VENV)/bin/python
STAMP := $(VENV)/.requirements-$(shell cat requirements.txt requirements-dev.txt client/pyproject.toml | sha1sum | cut -c1-12)
PYTEST_ARGS ?=
# Kubernetes releases of the local control plane (localcluster/versions.env). `make test` builds and runs only the
# default (the first, 1.36.3); tests marked for another minor (`@pytest.mark.k8s_version("1.37")`) are deselected
# there. 1.37.2 is built but not yet verified on a real 1.37 control plane; opt in with `make test-k8s-other`
# (builds every release, then runs the marked tests on the second) or GANGWEB_K8S_VERSION=1.37.2.
K8S_VERSIONS := $(shell . localcluster/versions.env && echo $$K8S_VERSIONS)
K8S_OTHER := $(word 2,$(K8S_VERSIONS))

.PHONY: run test test-k8s-other setup venv migrate localcluster-build lint bench clean-state screenshots

$(STAMP): requirements.txt requirements-dev.txt client/pyproject.toml
	@test -x $(PYTHON) || $(PY) -m venv $(VENV)
	$(PYTHON) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	@rm -f $(VENV)/.requirements-* && touch $(STAMP)

venv: $(STAMP)

# LOCALCLUSTER_BUILD_ARGS=--all builds every release of versions.env (e.g. 1.37.2 too); by default only the default.
LOCALCLUSTER_BUILD_ARGS ?=
localcluster-build:
	bash localcluster/build.sh $(LOCALCLUSTER_BUILD_ARGS)

migrate: venv
	@mkdir -p var
	DEBUG=1 $(PYTHON) manage.py migrate --noinput

setup: venv migrate

run: setup
	@bash localcluster/build.sh || echo "make run: local cluster build failed; starting without it"
	DEBUG=1 GANGWEB_METRICS_PUBLIC=$${GANGWEB_METRICS_PUBLIC:-1} $(PYTHON) manage.py runstack

test: venv localcluster-build
	bash scripts/ensure-test-deps.sh
	GANGWEB_TESTING=1 $(PYTHON) -m pytest $(PYTEST_ARGS)

# Unverified: the tests marked k8s_version on the other release (1.37.2); builds it first (a long Go build).
test-k8s-other: venv localcluster-build
	bash localcluster/build.sh --k8s-version $(K8S_OTHER)
	bash scripts/ensure-test-deps.sh
	GANGWEB_TESTING=1 GANGWEB_K8S_VERSION=$(K8S_OTHER) $(PYTHON) -m pytest -m k8s_version tests/cluster $(PYTEST_ARGS)
	GANGWEB_TESTING=1 GANGWEB_K8S_UPGRADE_TO=$(K8S_OTHER) $(PYTHON) -m pytest tests/cluster/test_upgrade.py \
		tests/cluster/test_localcluster_137.py $(PYTEST_ARGS)

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
