"""`python -m localcluster down` then `up` writes a new kubeconfig (new API server port, new certificates): the
running stack re-registers Cluster "local" from it, without a restart (services/clusters/local.py)."""
import itertools
import os
import time

import pytest
import yaml

from scheduling.models import Cluster
from scheduling.services.clusters import local as local_cluster

pytestmark = pytest.mark.django_db


def kubeconfig(port: int, token: str = "t0") -> str:
    """A kubeconfig shaped like localcluster's, for an API server nobody listens on (probes fail at once)."""
    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "localcluster", "cluster": {"server": f"https://127.0.0.1:{port}"}}],
        "users": [{"name": "localcluster", "user": {"token": token}}],
        "contexts": [{"name": "localcluster", "context": {"cluster": "localcluster", "user": "localcluster"}}],
        "current-context": "localcluster"}, sort_keys=False)


_later = itertools.count(1)


def rewrite(path, text: str) -> None:
    """Write `text` as `localcluster up` does, with a later modification time each time (whatever the clock's
    resolution)."""
    path.write_text(text)
    stamp = time.time_ns() + next(_later) * 10**9
    os.utime(path, ns=(stamp, stamp))


def test_a_new_kubeconfig_of_the_local_cluster_replaces_the_registered_one(tmp_path):
    path = tmp_path / "kubeconfig"
    rewrite(path, kubeconfig(port=1))
    local_cluster.register(path)
    follower = local_cluster.KubeconfigFollower(path)
    assert follower.check() is None  # nothing changed since it was registered

    path.unlink()  # `localcluster down`
    assert follower.check() is None
    rewrite(path, kubeconfig(port=2, token="t1"))  # `localcluster up`
    assert follower.check() is not None
    stored = Cluster.objects.get(name="local").kubeconfig
    assert stored == path.read_text() and "https://127.0.0.1:2" in stored and "t1" in stored
    assert follower.check() is None  # read once per change


def test_a_half_written_kubeconfig_is_read_again_once_complete(tmp_path):
    path = tmp_path / "kubeconfig"
    rewrite(path, kubeconfig(port=1))
    local_cluster.register(path)
    follower = local_cluster.KubeconfigFollower(path)
    rewrite(path, "apiVersion: v1\nclusters:\n- name: local")  # caught in the middle of the write
    assert follower.check() is None
    assert "https://127.0.0.1:1" in Cluster.objects.get(name="local").kubeconfig
    rewrite(path, kubeconfig(port=3))
    assert follower.check() is not None
    assert "https://127.0.0.1:3" in Cluster.objects.get(name="local").kubeconfig


def test_a_deleted_local_cluster_is_not_registered_again(tmp_path):
    path = tmp_path / "kubeconfig"
    rewrite(path, kubeconfig(port=1))
    local_cluster.register(path)
    follower = local_cluster.KubeconfigFollower(path)
    Cluster.objects.filter(name="local").delete()  # the admin removed it on purpose
    rewrite(path, kubeconfig(port=2))
    assert follower.check() is None
    assert not Cluster.objects.filter(name="local").exists()


def test_make_run_starts_the_local_cluster_with_kueue(tmp_path, monkeypatch):
    import io

    import localcluster

    asked = []
    kubeconfig_path = tmp_path / "kubeconfig"
    kubeconfig_path.write_text(kubeconfig(port=1))

    def fake_up(config, progress):
        asked.append(config)
        return localcluster.LocalCluster(kubeconfig_path)

    monkeypatch.setattr(localcluster, "up", fake_up)
    local_cluster.start_and_register(io.StringIO())
    assert [c.kueue for c in asked] == [True]


def test_registering_installs_the_sample_templates_once_and_keeps_an_admins_edits(tmp_path):
    from scheduling.models import RuntimeTemplate

    path = tmp_path / "kubeconfig"
    rewrite(path, kubeconfig(port=1))
    local_cluster.register(path)
    names = set(RuntimeTemplate.objects.values_list("name", flat=True))
    assert names == {"sample-gang", "sample-fails", "sample-kueue"}
    RuntimeTemplate.objects.filter(name="sample-fails").update(description="edited by an admin")
    local_cluster.register(path)
    assert RuntimeTemplate.objects.count() == 3
    assert RuntimeTemplate.objects.get(name="sample-fails").description == "edited by an admin"
