"""The CLI prints the submit-time limit warning with the API's amounts and unit: CPU in cores (not the queue's
stored millicores), from gangweb's count of its running jobs on a Workload API queue; and a cluster's capacity
with the API's numbers."""
import json

import pytest
from rest_framework.test import APIClient

from scheduling.choices import GangPhase
from scheduling.models import ClusterNodes
from tests import builders
from tests.cli import support

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_cli_prints_the_same_limit_warning_as_the_api(server, cli_world, tmp_path):
    template, queue, cluster = cli_world.setup
    queue.cpu_limit = 3000  # millicores, as KAI stores it: 3 CPU cores
    queue.save()
    builders.make_job(template, queue, cluster, phase=GangPhase.RUNNING, user=cli_world.admin)  # 2 pods x 1 core

    env = support.cli_env(server.url, cli_world.token, tmp_path)
    r = support.run_cli(["submit", "--name", "from-cli", "--template", "llm", "--queue", "team-a", "--cluster",
                         "local", "-o", "json"], env)
    assert r.returncode == 0, r.stderr
    (printed,) = [w for w in json.loads(r.stdout)["warnings"] if w["code"] == "OverQueueLimit"]

    api = APIClient()
    api.force_authenticate(cli_world.admin)
    answer = api.post("/api/v1/jobs/", builders.submit_body(template, queue, cluster, name="from-api"), format="json")
    (from_api,) = [w for w in answer.data["warnings"] if w["code"] == "OverQueueLimit"]

    assert (printed["unit"], printed["limit"], printed["allocated"], printed["requested"], printed["source"]) == \
        ("CPU cores", 3, 2, 2, "gangweb")
    assert printed == from_api
    assert "gangweb's count of its running jobs says 2 of 3 CPU cores allocated (cpu_limit)" in printed["message"]

    # A table on a terminal: the same sentence, on stderr (stdout keeps the jobs table).
    r = support.run_cli(["submit", "--name", "from-cli-2", "--template", "llm", "--queue", "team-a", "--cluster",
                         "local"], env)
    assert r.returncode == 0, r.stderr
    assert f"warning from-cli-2: {printed['message']}" in " ".join(r.stderr.split())


def test_the_cli_prints_a_clusters_capacity_as_the_api_answers_it(server, cli_world, tmp_path):
    template, queue, cluster = cli_world.setup
    allocatable = {"nvidia.com/gpu": 8, "cpu": 64, "memory": 512 * 2**30}
    cluster.capacity = {"nodes": 1, "allocatable": allocatable}
    cluster.save()
    ClusterNodes.objects.create(cluster=cluster, nodes=[{"name": "n-0", "labels": {
        "nvidia.com/gpu.product": "NVIDIA-A100"}, "allocatable": allocatable}])
    env = support.cli_env(server.url, cli_world.token, tmp_path)
    r = support.run_cli(["capacity", "local", "-o", "json"], env)
    assert r.returncode == 0, r.stderr
    printed = json.loads(r.stdout)
    api = APIClient()
    api.force_authenticate(cli_world.admin)
    answer = api.get("/api/v1/clusters/local/capacity/").json()
    assert printed["totals"] == answer["totals"]
    assert printed["totals"]["allocatable"] == {"gpu": 8, "cpu": 64, "memory": 512}
    r = support.run_cli(["capacity", "local"], env)
    assert r.returncode == 0, r.stderr
    (gpu_line,) = [line for line in r.stdout.splitlines() if line.strip().startswith("gpu")]
    assert gpu_line.split()[:3] == ["gpu", "8", "GPUs"]
    assert "NVIDIA-A100" in r.stdout and "pods could not be listed" in r.stdout
