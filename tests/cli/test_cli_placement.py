"""`gangweb submit` without --cluster (or with several) lets the server place the job; `gangweb get` says where and
why (docs/cli.md)."""
import json

import pytest
from django.utils import timezone

from scheduling.models import Cluster, GangJob
from tests import builders
from tests.cli import support

pytestmark = pytest.mark.django_db(transaction=True)
GIB = 2**30


def known(cluster: Cluster, gpus: int) -> Cluster:
    cluster.health, cluster.last_probe_at = "Healthy", timezone.now()
    cluster.available_backends = ["k8s-workload-v1beta1"]
    cluster.capacity = {"nodes": 1, "allocatable": {"nvidia.com/gpu": gpus, "cpu": 8 * gpus, "memory": 64 * gpus * GIB}}
    cluster.save()
    return cluster


@pytest.fixture
def env(server, cli_world, tmp_path):
    local = known(cli_world.cluster, 4)
    other = known(builders.make_cluster("other"), 16)
    cli_world.queue.clusters.set([local, other])
    builders.make_job(*cli_world.setup, user=cli_world.admin, name="fills-local", phase="Running", requested_gpu=4)
    return support.cli_env(server.url, cli_world.token, tmp_path)


def test_submit_without_a_cluster_is_placed_and_get_says_where_and_why(env, cli_world):
    r = support.run_cli(["submit", "--name", "placed", "--template", "llm", "--queue", "team-a", "-o", "json"], env)
    assert r.returncode == 0, r.stderr
    job = json.loads(r.stdout)
    assert job["cluster"] == "other"
    r = support.run_cli(["get", str(job["id"])], env)
    assert r.returncode == 0, r.stderr
    # both fit the CPU-only job (2 cores); the queue already uses part of local
    assert "on other: placed on other: 128 CPU cores free; local has 30 CPU cores free" in r.stdout


def test_a_repeated_cluster_flag_chooses_among_those_only(env, cli_world):
    r = support.run_cli(["submit", "--name", "among", "--template", "llm", "--queue", "team-a", "--cluster", "local",
                         "--cluster", "other", "-o", "json"], env)
    assert r.returncode == 0, r.stderr
    assert GangJob.objects.get(name="among").placement["clusters"][0]["cluster"] == "local"
    r = support.run_cli(["submit", "--name", "one", "--template", "llm", "--queue", "team-a", "--cluster", "local",
                         "-o", "json"], env)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["cluster"] == "local"  # one named cluster: exactly that one, as always
    assert GangJob.objects.get(name="one").placement is None
