"""Which tests need what `localcluster/build.sh` builds, so `make test` can run the others while it builds.

Loaded as a plugin by the root conftest.py. At collection, before `-m` selects anything:

- a test that uses the session's control plane (a fixture of tests/cluster/conftest.py: `kube_cluster`, `kube_api`,
  `kube_namespace`, `local_binaries`) must carry the `cluster` marker, and one that uses the fault runs' private
  stack (`stack`, tests/faults/conftest.py) the `faults` marker; a test that does not is a collection error naming
  it, because `-m "not cluster"` would otherwise run it before the binaries exist (and a developer's quick
  `-m "not cluster"` run would start a control plane);
- every test marked `cluster` or `faults`, or using the built Helm (`helm`, tests/cluster/test_helm_chart.py), gets
  the `built` marker. `make test` runs `-m "not built"` beside the build and `-m built` after it
  (scripts/test-suite.sh).
"""
from __future__ import annotations

import pytest

BUILT = "built"
# fixture name -> the marker a test using it must carry
_NEEDS_MARKER = {
    "kube_cluster": "cluster",
    "kube_api": "cluster",
    "kube_namespace": "cluster",
    "local_binaries": "cluster",
    "stack": "faults",
}
# Fixtures that need a built binary but no control plane.
_BUILT_FIXTURES = {"helm"}


def pytest_configure(config):
    """Register the `built` marker."""
    config.addinivalue_line(
        "markers", f"{BUILT}: needs a binary of localcluster/build.sh (control plane, Helm); set at collection on "
                   "every cluster and faults test and every test using the built Helm (tests/build_markers.py)")


def unmarked(item) -> list[str]:
    """The problems of one collected test: ["uses kube_cluster without the cluster marker", ...] (empty if none).
    Reads the fixture closure, so a fixture that depends on `kube_cluster` counts as using it."""
    fixtures = set(getattr(item, "fixturenames", ()))
    marks = {m.name for m in item.iter_markers()}
    return [f"uses {name} without the {marker} marker" for name, marker in sorted(_NEEDS_MARKER.items())
            if name in fixtures and marker not in marks]


def needs_build(item) -> bool:
    """Whether the test needs a binary of localcluster/build.sh: marked cluster or faults, or using a built tool."""
    marks = {m.name for m in item.iter_markers()}
    return bool(marks & {"cluster", "faults"}) or bool(set(getattr(item, "fixturenames", ())) & _BUILT_FIXTURES)


def pytest_itemcollected(item):
    """Mark a test that needs the build `built`. Done as each test is collected, so before any
    `pytest_collection_modifyitems`, where `-m` selects on it."""
    if needs_build(item):
        item.add_marker(BUILT)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Fail the collection on a test that uses the control plane or the fault stack without its marker."""
    errors = [f"{item.nodeid}: {problem}" for item in items for problem in unmarked(item)]
    if errors:
        raise pytest.UsageError("tests that need a control plane must say so with a marker (tests/build_markers.py):\n"
                                + "\n".join(errors))
