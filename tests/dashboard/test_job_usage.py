"""gangweb's own usage estimate per queue: each job's requested totals kept in columns at submit, summed per queue
in the database, rolled up to the parents."""
import importlib

import pytest
from django.apps import apps

from scheduling.models import GangJob
from scheduling.models.jobs import requested_totals
from scheduling.services.queues import usage as queue_usage
from scheduling.services.queues.policies import QueueTree
from tests import builders

pytestmark = pytest.mark.django_db
GIB = 2**30


def submit(api, bodies):
    response = api.post("/api/v1/jobs/bulk/", {"jobs": bodies}, format="json")
    assert response.status_code == 201, response.content


def test_a_submit_keeps_the_whole_gangs_requests_in_columns(api, setup):
    template, queue, cluster = setup  # pod set "worker": 2 replicas of 1 CPU, 1Gi
    gpu_template = builders.make_template("gpu", pod_sets=[builders.pod_set(
        replicas=3, containers=[builders.container(cpu="500m", memory="2Gi", gpu=2)])])
    bodies = [builders.submit_body(template, queue, cluster, name="plain"),
              builders.submit_body(template, queue, cluster, name="wide",
                                   overrides={"podSets": {"worker": {"replicas": 4}}}),
              builders.submit_body(gpu_template, queue, cluster, name="gpus")]
    submit(api, bodies)
    totals = {j.name: (j.requested_gpu, j.requested_cpu_millicores, j.requested_memory_bytes)
              for j in GangJob.objects.all()}
    assert totals == {"plain": (0.0, 2000, 2 * GIB), "wide": (0.0, 4000, 4 * GIB), "gpus": (6.0, 1500, 6 * GIB)}


def test_a_job_saved_one_by_one_gets_its_totals_too(setup):
    template, queue, cluster = setup
    job = GangJob.objects.create(name="single", template_version=template, queue=queue, cluster=cluster,
                                 resolved_spec=template.spec)
    job.refresh_from_db()
    assert (job.requested_cpu_millicores, job.requested_memory_bytes) == (2000, 2 * GIB)


def test_totals_count_init_containers_and_overhead_as_kube_scheduler_does():
    spec = {"podSets": [{"name": "w", "replicas": 2, "template": {"spec": {
        "containers": [{"name": "a", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
        "initContainers": [{"name": "warm", "resources": {"limits": {"cpu": "3", "nvidia.com/gpu": "1"}}}],
        "overhead": {"cpu": "250m"}}}}]}
    # Per pod: max(1, 3) CPU + 0.25 overhead, 1Gi, 1 GPU (the init container's limit stands in for its request).
    assert requested_totals(spec) == (2.0, 6500, 2 * GIB)


@pytest.mark.parametrize("spec", [{}, None, {"podSets": [{"name": "w"}]},
                                  {"podSets": [{"name": "w", "replicas": 1, "template": {"spec": {"containers": [
                                      {"name": "a", "resources": {"requests": {"cpu": "lots"}}}]}}}]}])
def test_a_spec_that_cannot_be_read_counts_as_nothing(spec):
    assert requested_totals(spec) == (0.0, 0, 0)


def test_the_estimate_sums_active_jobs_and_counts_only_placed_ones_as_allocated(api, setup):
    template, queue, cluster = setup
    bodies = [builders.submit_body(template, queue, cluster) for _ in range(3)]
    bodies.append(builders.submit_body(template, queue, cluster, overrides={"podSets": {"worker": {"replicas": 4}}}))
    submit(api, bodies)
    GangJob.objects.filter(name__in=[bodies[0]["name"], bodies[3]["name"]]).update(phase="Running")
    GangJob.objects.filter(name=bodies[1]["name"]).update(phase="Succeeded")  # finished: not counted

    usage = queue_usage.estimated_usage()[queue.id]
    assert usage["jobs"] == 3
    # KAI units: millicores, MB (10^6 bytes), devices. Requested: 2 + 2 + 4 pods; allocated: the Running 2 + 4.
    assert usage["requested"] == pytest.approx({"cpu": 8000, "memory": 8 * GIB / 1e6, "gpu": 0})
    assert usage["allocated"] == pytest.approx({"cpu": 6000, "memory": 6 * GIB / 1e6, "gpu": 0})
    assert queue_usage.estimated_usage(cluster="elsewhere") == {}


def test_a_parents_estimate_includes_its_childrens(api, setup):
    template, _, cluster = setup
    parent = builders.make_queue("research", clusters=[cluster])
    kids = [builders.make_queue(f"team-{i}", parent=parent, clusters=[cluster]) for i in range(2)]
    submit(api, [builders.submit_body(template, kid, cluster) for kid in kids for _ in range(2)])
    rolled = queue_usage.rolled_up(QueueTree.load_rows(), queue_usage.estimated_usage())
    assert rolled[parent.id]["requested"]["cpu"] == 4 * 2000
    assert (rolled[parent.id]["jobs"], rolled[parent.id]["own_jobs"]) == (4, 0)
    assert rolled[kids[0].id]["requested"]["cpu"] == 2 * 2000


def test_the_migration_fills_the_columns_of_existing_jobs(api, setup):
    template, queue, cluster = setup
    submit(api, [builders.submit_body(template, queue, cluster, overrides={"podSets": {"worker": {"replicas": n}}})
                 for n in (1, 3)])
    GangJob.objects.update(requested_gpu=0, requested_cpu_millicores=0, requested_memory_bytes=0)
    migration = importlib.import_module("scheduling.migrations.0005_job_requested_totals")
    migration.fill_existing(apps, None)
    assert sorted(GangJob.objects.values_list("requested_cpu_millicores", "requested_memory_bytes")) == [
        (1000, GIB), (3000, 3 * GIB)]
