"""The collection check of tests/build_markers.py: a test that uses the control plane must say so with `cluster`
(else `make test` would run it beside the build, before the binaries exist), and the tests that need the build are
the ones marked `built`."""
from types import SimpleNamespace

import pytest

from tests import build_markers


def item(fixtures=(), marks=()):
    """A collected test as the hook sees it: its fixture closure and its markers."""
    return SimpleNamespace(fixturenames=list(fixtures),
                           iter_markers=lambda: [SimpleNamespace(name=m) for m in marks])


@pytest.mark.parametrize("fixtures, marks, problems", [
    (["db", "kube_namespace", "kube_api", "kube_cluster"], [],
     ["uses kube_api without the cluster marker", "uses kube_cluster without the cluster marker",
      "uses kube_namespace without the cluster marker"]),
    (["kube_cluster"], ["cluster"], []),
    (["local_binaries"], ["django_db"], ["uses local_binaries without the cluster marker"]),
    (["stack", "namespace"], ["cluster"], ["uses stack without the faults marker"]),
    (["stack"], ["faults"], []),
    (["db", "api"], [], []),
])
def test_a_test_using_the_control_plane_without_its_marker_is_named(fixtures, marks, problems):
    assert build_markers.unmarked(item(fixtures, marks)) == problems


@pytest.mark.parametrize("fixtures, marks, built", [
    (["kube_cluster"], ["cluster"], True),
    (["stack"], ["faults"], True),
    (["helm", "tmp_path"], [], True),
    (["db", "api"], ["django_db"], False),
    (["page"], ["ui"], False),
])
def test_the_tests_that_need_the_build_are_those_of_the_cluster_the_fault_stack_or_helm(fixtures, marks, built):
    assert build_markers.needs_build(item(fixtures, marks)) is built


def test_this_run_marked_every_cluster_test_built(request):
    """The hook ran on this session's items: a test here carries `built` exactly when it needs the build."""
    for collected in request.session.items:
        marks = {m.name for m in collected.iter_markers()}
        assert ("built" in marks) == build_markers.needs_build(collected), collected.nodeid
