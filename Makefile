# gangweb: `make run` sets up and runs everything on a laptop; `make test` sets up and runs the whole suite.
SHELL := /bin/bash
PY ?= python3
VENV := .venv
PYTHON := $(VENV)/bin/python
STAMP := $(VENV)/.requirements-$(shell cat requirements.txt requirements-dev.txt | sha1sum | cut -c1-12)
PYTEST_ARGS ?=
# Kubernetes releases of the local control plane (localcluster/versions.env): the first runs the whole suite, the
# second the tests marked for it (`@pytest.mark.k8s_version("1.36")`: the v1alpha2 plugin, the in-place upgrade).
K8S_VERSIONS := $(shell . localcluster/versions.env && echo $$K8S_VERSIONS)
K8S_PREVIOUS := $(word 2,$(K8S_VERSIONS))

.PHONY: run test setup venv migrate localcluster-build lint bench clean-state screenshots

$(STAMP): requirements.txt requirements-dev.txt
	@test -x $(PYTHON) || $(PY) -m venv $(VENV)
	$(PYTHON) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	@rm -f $(VENV)/.requirements-* && touch $(STAMP)

venv: $(STAMP)

localcluster-build:
	bash localcluster/build.sh --all

migrate: venv
	@mkdir -p var
	DEBUG=1 $(PYTHON) manage.py migrate --noinput

setup: venv migrate

run: setup
	@bash localcluster/build.sh || echo "make run: local cluster build failed; starting without it"
	DEBUG=1 $(PYTHON) manage.py runstack

test: venv localcluster-build
	bash scripts/ensure-test-deps.sh
	GANGWEB_TESTING=1 $(PYTHON) -m pytest $(PYTEST_ARGS)
	GANGWEB_TESTING=1 GANGWEB_K8S_VERSION=$(K8S_PREVIOUS) $(PYTHON) -m pytest -m k8s_version tests/cluster $(PYTEST_ARGS)

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
