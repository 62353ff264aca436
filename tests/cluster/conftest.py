"""Fixtures for tests against a real Kubernetes control plane (the ``localcluster`` package).

The release is ``$GANGWEB_K8S_VERSION``, else the default of ``localcluster/versions.env`` (1.37.2). A test that
holds only on one release carries ``@pytest.mark.k8s_version("1.37")``; in a session on another release it is
deselected (shown in the summary). ``make test`` runs the whole suite on 1.37.2, then the tests marked
``k8s_version`` on 1.36.3 (``make test-k8s-other``). A test that upgrades a cluster of its own from 1.36.3 to
1.37.2 carries ``k8s_version("1.36", upgrade_to="1.37.2")`` and is deselected unless ``$GANGWEB_K8S_UPGRADE_TO``
names that release (it needs both releases' binaries).

- ``kube_cluster`` (session): starts one control plane per pytest run in a temporary state directory and stops it
  at the end, also when tests fail. With ``GANGWEB_TEST_KUBECONFIG`` set, that cluster is used instead and nothing
  is started or stopped. If the binaries are not built the fixture fails (never skips) and says how to build them.
- ``kube_api`` (session): a kubernetes ``ApiClient`` for that cluster.
- ``kube_namespace`` (function): a fresh namespace per test, whose ``default`` ServiceAccount exists (pods can be
  created at once); deleted after the test without waiting.
- ``local_binaries`` (session): the built binaries, for tests that start clusters of their own.
- ``kueue_cluster`` (session): the same `LocalCluster` as ``kube_cluster``, with the Kueue manager running on it
  (CRDs, webhooks, visibility API; localcluster/kueue.py). Kueue starts the first time a test asks for it (~10-30
  s under load), then stays for the rest of the session (of that xdist worker); tests that do not ask pay nothing.
  Fails (never skips) when Kueue is not built, naming localcluster/build.sh. With ``GANGWEB_TEST_KUBECONFIG``, that
  cluster must already run Kueue (its Lease held).

Tests that need the cluster carry ``@pytest.mark.cluster``. When such a test fails, the tails of the component logs
are added to its report.
"""

from __future__ import annotations

import os
import re
import uuid
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

import localcluster
from localcluster.processes import wait_until

_LOG_TAIL_LINES = 40
_started: list[localcluster.LocalCluster] = []


def pytest_configure(config):
    """Register the ``cluster`` marker."""
    config.addinivalue_line(
        "markers", "cluster: needs the real local Kubernetes control plane (localcluster; make localcluster-build)"
    )


def session_k8s_minor() -> str | None:
    """The Kubernetes minor ("1.37") the session's control plane runs, or None for an external cluster
    (``GANGWEB_TEST_KUBECONFIG``), whose tests are never deselected by release."""
    if os.environ.get("GANGWEB_TEST_KUBECONFIG"):
        return None
    return localcluster.binaries.minor_of(localcluster.resolve_k8s_version())


def pytest_collection_modifyitems(config, items):
    """Deselect the tests marked ``k8s_version(minor)`` for another release than the session's, and those marked
    ``k8s_version(minor, upgrade_to=release)`` unless ``$GANGWEB_K8S_UPGRADE_TO`` is that release."""
    minor = session_k8s_minor()
    if minor is None:
        return
    upgrade_to = os.environ.get("GANGWEB_K8S_UPGRADE_TO", "").strip().removeprefix("v")
    keep, drop = [], []
    for item in items:
        marker = item.get_closest_marker("k8s_version")
        other = marker is not None and marker.args and marker.args[0] != minor
        unwanted_upgrade = marker is not None and marker.kwargs.get("upgrade_to", upgrade_to) != upgrade_to
        (drop if other or unwanted_upgrade else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """On a failed cluster test, append the component log tails to the test's report."""
    outcome = yield
    report = outcome.get_result()
    if report.failed and "kube_cluster" in getattr(item, "fixturenames", ()) and _started:
        report.sections.append(("localcluster component logs", _started[0].log_tails(_LOG_TAIL_LINES)))


def _missing_binaries() -> str | None:
    """The BinariesMissing message, or None when everything is built."""
    try:
        localcluster.require_binaries()
    except localcluster.BinariesMissing as e:
        return str(e)
    return None


@pytest.fixture(scope="session")
def local_binaries() -> localcluster.Binaries:
    """The built control-plane binaries; fails (never skips) with how to build them."""
    missing = _missing_binaries()
    if missing:
        pytest.fail(missing, pytrace=False)
    return localcluster.find_binaries()


@pytest.fixture(scope="session")
def kube_cluster(tmp_path_factory) -> localcluster.LocalCluster:
    """The session's control plane: `localcluster.LocalCluster` (kubeconfig, api_client(), add_node, remove_node)."""
    external = os.environ.get("GANGWEB_TEST_KUBECONFIG")
    if external:
        yield localcluster.attach(external)
        return
    missing = _missing_binaries()
    if missing:
        pytest.fail(missing, pytrace=False)
    state_dir = Path(os.environ.get("GANGWEB_TEST_STATE_DIR") or tmp_path_factory.mktemp("localcluster"))
    config = localcluster.ClusterConfig(state_dir=state_dir, die_with_parent=True)
    try:
        cluster = localcluster.up(config)
    except localcluster.ClusterStartError as e:
        failure = f"local control plane did not start: {e}"
    else:
        failure = None
    if failure:
        pytest.fail(failure, pytrace=False)
    _started.append(cluster)
    try:
        yield cluster
    finally:
        _started.remove(cluster)
        localcluster.down(state_dir)


@pytest.fixture(scope="session")
def kueue_cluster(kube_cluster) -> localcluster.LocalCluster:
    """`kube_cluster` with Kueue running on it; ``kueue_cluster.kueue`` holds its ports and Configuration path."""
    from localcluster import kueue

    if kube_cluster.state is None:  # an external cluster (GANGWEB_TEST_KUBECONFIG): Kueue must already run there
        with kube_cluster.api_client() as api:
            if kueue.lease_holder(api) is None:
                pytest.fail(f"the cluster of GANGWEB_TEST_KUBECONFIG runs no Kueue (no Lease {kueue.NAMESPACE}/"
                            f"{kueue.LEASE_NAME} held)", pytrace=False)
        return kube_cluster
    try:
        kube_cluster.start_kueue(timeout=180, die_with_parent=True)
    except (localcluster.BinariesMissing, localcluster.ClusterStartError) as e:
        pytest.fail(f"Kueue did not start on the local control plane: {e}", pytrace=False)
    return kube_cluster


@pytest.fixture(scope="session")
def kube_api(kube_cluster) -> client.ApiClient:
    """A kubernetes `ApiClient` for the session's cluster (admin, cluster-wide)."""
    api = kube_cluster.api_client()
    yield api
    api.close()


def _namespace_name(nodeid: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", nodeid.split("::")[-1].lower()).strip("-")[:40].strip("-")
    return f"t-{slug}-{uuid.uuid4().hex[:6]}"


@pytest.fixture
def kube_namespace(kube_api, request) -> str:
    """A new namespace for this test (its name); the ``default`` ServiceAccount exists before the test runs."""
    core = client.CoreV1Api(kube_api)
    name = _namespace_name(request.node.nodeid)
    core.create_namespace({"metadata": {"name": name, "labels": {"gangweb.io/test": "true"}}})

    def has_default_sa() -> bool:
        try:
            core.read_namespaced_service_account("default", name)
            return True
        except ApiException as e:
            if e.status == 404:
                return False
            raise

    wait_until(has_default_sa, 30, f"ServiceAccount {name}/default")
    yield name
    try:
        core.delete_namespace(name)
    except ApiException as e:
        if e.status != 404:
            raise


@pytest.fixture
def world(kube_cluster, kube_namespace, admin_user, enqueued):
    """The test's gangweb side of the real control plane (reconcile_support.World): the Cluster row, a queue
    granted `kube_namespace`, the admin submitting, reconcile passes run in-process. A module may define its own."""
    from .reconcile_support import make_world

    return make_world(kube_cluster, kube_namespace, admin_user)


@pytest.fixture
def priority_classes(kube_api):
    """`new(value=1000) -> name`: PriorityClasses of this test (user-definable values, at most 1,000,000,000; the
    API server resolves a PodGroup's priorityClassName at admission), deleted after it."""
    sched = client.SchedulingV1Api(kube_api)
    made = []

    def new(value: int = 1000) -> str:
        name = f"pc-{uuid.uuid4().hex[:8]}"
        sched.create_priority_class({"metadata": {"name": name}, "value": value})
        made.append(name)
        return name

    yield new
    for name in made:
        try:
            sched.delete_priority_class(name)
        except ApiException as e:
            if e.status != 404:
                raise


# Nodes a test adds carry this label (value: its namespace); its jobs select them, so no other test's pods land there.
POOL_LABEL = "gangweb.io/test-pool"


@pytest.fixture
def pool_nodes(kube_cluster, kube_namespace):
    """`add(count=1)`: adds fake 8-GPU nodes labelled `POOL_LABEL: <the test's namespace>`, for this test only;
    removed (without waiting) after it."""
    added = []

    def add(count=1):
        for _ in range(count):
            name = f"{kube_namespace[:40]}-n{len(added)}"
            kube_cluster.add_node(name, gpus=8, labels={POOL_LABEL: kube_namespace})
            added.append(name)

    yield add
    for name in added:
        kube_cluster.remove_node(name, wait=False)


@pytest.fixture
def watcher(world):
    """The cluster watch of `world` (the test's fixture) in a thread, as `manage.py watch_clusters` runs
    it: it records the phases as they happen. Stopped (its threads joined) after the test."""
    from scheduling.reconcile import watching

    w = watching.watcher_for(world.cluster, api=world.api).start()
    assert w.wait_synced(30)
    yield w
    w.stop()
