"""One job, one answer to "what does it ask for": the same pod shapes fed to every consumer give the same numbers.

Issue 19: one job had three request totals (minResources 8.5 cores, the queue-limit check 8, the job page 4).
Every consumer now calls `kube.resources` (kube-scheduler's `PodRequests`); this table feeds each shape to all of
them, through their real entry points, and asserts the one total each shape has:

- submit (the queue-limit check: a queue whose limit is exactly the total takes the job, one a millicore or
  megabyte under refuses it), move and resubmit (the same check, refused the same way);
- the stored totals (`GangJob.requested_*`) and what they feed: gangweb's queue usage estimate and the cluster's
  in-use sum (why-pending's ClusterBusy);
- `minResources` of every backend that has one (coscheduling, Volcano);
- the job page's "Asks for" (rendered), why-pending's `job_requests` and the capacity facts' per-pod asks;
- the template preview (it knows no cluster: a RuntimeClass's overhead is added where the job runs, and the
  preview says so).

The RuntimeClass overhead here is the cluster row's cached list (`Cluster.runtime_classes`, as the probe writes
it); tests/cluster/test_request_arithmetic.py reads it from a real RuntimeClass on the control plane.
"""
from __future__ import annotations

import copy
import math
import re
from dataclasses import dataclass, field
from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError
from kubernetes.utils import parse_quantity

from scheduling.backends import registry
from scheduling.choices import GangPhase
from scheduling.db import cluster_usage
from scheduling.kube import resources, runtime_classes
from scheduling.models import GangJob
from scheduling.models.jobs import requested_totals
from scheduling.observe import capacity, why_pending
from scheduling.reconcile import desired
from scheduling.services.jobs import lifecycle as job_service
from scheduling.services.queues import limits as queue_limits
from scheduling.services.queues import usage as queue_usage
from scheduling.services.templates import versions as template_versions
from scheduling.views.display import for_people, requests_of_spec
from scheduling.views.preview import preview
from tests import builders

GPU = "nvidia.com/gpu"
KATA = {"kata": {"cpu": "250m", "memory": "128Mi"}}  # a RuntimeClass with overhead.podFixed, as probed


def c(name, requests=None, limits=None, **extra) -> dict:
    res = {}
    if requests:
        res["requests"] = requests
    if limits:
        res["limits"] = limits
    return {"name": name, "image": "registry.example/train:1", "resources": res, **extra}


def sidecar(name, requests) -> dict:
    return c(name, requests, restartPolicy="Always")


def ps(name, replicas, containers, init=(), **spec) -> dict:
    pod = {"containers": list(containers), **spec}
    if init:
        pod["initContainers"] = list(init)
    return {"name": name, "replicas": replicas, "template": {"metadata": {}, "spec": pod}}


@dataclass
class Shape:
    """Pod sets and what the whole gang asks (quantities), and per pod of each pod set."""

    id: str
    pod_sets: list
    total: dict
    per_pod: list
    preview_total: dict | None = None  # what the cluster-less template preview counts, when it differs
    submittable: bool = True
    cluster_classes: dict = field(default_factory=lambda: dict(KATA))


# The issue's template: a launcher and two workers with an init container and a native sidecar.
ISSUE = [ps("launcher", 1, [c("main", {"cpu": "1", "memory": "768Mi", GPU: "1"}, {GPU: "1"})]),
         ps("worker", 2, [c("main", {"cpu": "2", "memory": "3Gi", GPU: "1"}, {GPU: "1"})],
            init=[sidecar("proxy", {"cpu": "250m", "memory": "256Mi"}),
                  c("fetch", {"cpu": "3500m", "memory": "1Gi"})])]

SHAPES = [
    Shape("issue-example", ISSUE, {"cpu": "8500m", "memory": "7424Mi", GPU: "3"},
          [{"cpu": "1", "memory": "768Mi", GPU: "1"}, {"cpu": "3750m", "memory": "3328Mi", GPU: "1"}]),
    Shape("plain", [ps("w", 3, [c("main", {"cpu": "2", "memory": "4Gi", GPU: "1"}, {GPU: "1"})])],
          {"cpu": "6", "memory": "12Gi", GPU: "3"}, [{"cpu": "2", "memory": "4Gi", GPU: "1"}]),
    # A sidecar started before a large init container runs beside it: the init phase needs 4 + 0.5.
    Shape("sidecar-before-large-init", [ps("w", 2, [c("main", {"cpu": "2", "memory": "2Gi"})],
                                           init=[sidecar("proxy", {"cpu": "500m", "memory": "256Mi"}),
                                                 c("fetch", {"cpu": "4", "memory": "1Gi"})])],
          {"cpu": "9", "memory": "4608Mi"}, [{"cpu": "4500m", "memory": "2304Mi"}]),
    # Started after it, the sidecar is not running yet while the init container runs: the init phase needs 4.
    Shape("sidecar-after-large-init", [ps("w", 2, [c("main", {"cpu": "2", "memory": "2Gi"})],
                                          init=[c("fetch", {"cpu": "4", "memory": "1Gi"}),
                                                sidecar("proxy", {"cpu": "500m", "memory": "256Mi"})])],
          {"cpu": "8", "memory": "4608Mi"}, [{"cpu": "4", "memory": "2304Mi"}]),
    # The cluster's RuntimeClass "kata" adds 250m / 128Mi to every pod (admission writes it into spec.overhead).
    Shape("runtime-class-overhead", [ps("w", 4, [c("main", {"cpu": "1", "memory": "1Gi"})],
                                        runtimeClassName="kata")],
          {"cpu": "5", "memory": "4608Mi"}, [{"cpu": "1250m", "memory": "1152Mi"}],
          preview_total={"cpu": "4", "memory": "4Gi"}),
    # A RuntimeClass the cluster does not have (or has without overhead) adds nothing.
    Shape("runtime-class-without-overhead", [ps("w", 2, [c("main", {"cpu": "1", "memory": "1Gi"})],
                                                runtimeClassName="runc")],
          {"cpu": "2", "memory": "2Gi"}, [{"cpu": "1", "memory": "1Gi"}]),
    Shape("own-spec-overhead", [ps("w", 2, [c("main", {"cpu": "1", "memory": "1Gi"})],
                                   overhead={"cpu": "100m", "memory": "64Mi"})],
          {"cpu": "2200m", "memory": "2176Mi"}, [{"cpu": "1100m", "memory": "1088Mi"}]),
    # Pod-level resources replace the containers' cpu and memory; GPUs still come from the containers.
    Shape("pod-level-requests", [ps("w", 2, [c("a", {"cpu": "1", "memory": "1Gi", GPU: "1"}, {GPU: "1"}),
                                             c("b", {"cpu": "1", "memory": "1Gi"})],
                                    resources={"requests": {"cpu": "3", "memory": "4Gi"}})],
          {"cpu": "6", "memory": "8Gi", GPU: "2"}, [{"cpu": "3", "memory": "4Gi", GPU: "1"}]),
    # Pod-level limits only: a resource no container requests gets the pod-level limit as its request; one the
    # containers request keeps their sum (defaultPodRequests).
    Shape("pod-level-limits-only", [ps("w", 1, [c("main", {"memory": "1Gi"})],
                                       resources={"limits": {"cpu": "6", "memory": "8Gi"}})],
          {"cpu": "6", "memory": "1Gi"}, [{"cpu": "6", "memory": "1Gi"}]),
    Shape("limit-only", [ps("w", 2, [c("main", None, {"cpu": "1500m", "memory": "2Gi", GPU: "2"})])],
          {"cpu": "3", "memory": "4Gi", GPU: "4"}, [{"cpu": "1500m", "memory": "2Gi", GPU: "2"}]),
    # A GPU only an init container asks for still has to be free when the pod starts.
    Shape("gpus-only-in-init", [ps("w", 3, [c("main", {"cpu": "1", "memory": "1Gi"})],
                                   init=[c("warmup", {"cpu": "500m"}, {GPU: "2"})])],
          {"cpu": "3", "memory": "3Gi", GPU: "6"}, [{"cpu": "1", "memory": "1Gi", GPU: "2"}]),
    Shape("many-containers-every-resource", [ps("w", 2, [
        c("a", {"cpu": "250m", "memory": "100M", "ephemeral-storage": "10Gi"}, {"example.com/fpga": "1"}),
        c("b", {"cpu": "750m", "memory": "900M"})])],
          {"cpu": "2", "memory": "2G", "ephemeral-storage": "20Gi", "example.com/fpga": "2"},
          [{"cpu": "1", "memory": "1G", "ephemeral-storage": "10Gi", "example.com/fpga": "1"}]),
    # A stored row whose second pod set has 0 replicas (templates refuse 0: only such rows have it) asks for none of
    # that pod set's GPUs.
    Shape("replicas-0", [ps("launcher", 1, [c("main", {"cpu": "1", "memory": "1Gi"})]),
                         ps("worker", 0, [c("main", {"cpu": "8", "memory": "64Gi", GPU: "8"}, {GPU: "8"})])],
          {"cpu": "1", "memory": "1Gi"}, [{"cpu": "1", "memory": "1Gi"}, {"cpu": "8", "memory": "64Gi", GPU: "8"}],
          submittable=False),
    # Sidecars, an init peak, overhead from the RuntimeClass and pod-level cpu together.
    Shape("everything-at-once", [ps("w", 2, [c("main", {"cpu": "1", "memory": "2Gi", GPU: "1"}, {GPU: "1"})],
                                    init=[sidecar("log", {"cpu": "100m", "memory": "128Mi"}),
                                          c("fetch", {"cpu": "2", "memory": "4Gi"})],
                                    runtimeClassName="kata", resources={"requests": {"cpu": "5"}})],
          {"cpu": "10500m", "memory": "8704Mi", GPU: "2"}, [{"cpu": "5250m", "memory": "4352Mi", GPU: "1"}],
          preview_total={"cpu": "10", "memory": "8448Mi", GPU: "2"}),
]


def amounts(quantities: dict) -> dict[str, Decimal]:
    return {k: parse_quantity(v) for k, v in quantities.items()}


def numbers(quantities: dict) -> dict:
    return resources.as_numbers(amounts(quantities))


def kai(quantities: dict) -> dict:
    """KAI units: GPUs (devices), CPU millicores, memory MB (10^6 bytes) rounded up."""
    a = amounts(quantities)
    return {"gpu": float(a.get(GPU, 0)), "cpu": math.ceil(a.get("cpu", 0) * 1000),
            "memory": math.ceil(a.get("memory", 0) / Decimal(10**6))}


def test_the_table_covers_the_issues_shapes():
    assert len(SHAPES) >= 12
    # each expected total is the per-pod asks times the replicas (the table is consistent with itself)
    for shape in SHAPES:
        total: dict[str, Decimal] = {}
        for pod_set, one in zip(shape.pod_sets, shape.per_pod, strict=True):
            for k, v in amounts(one).items():
                total[k] = total.get(k, Decimal(0)) + v * pod_set["replicas"]
        assert {k: v for k, v in total.items() if v} == amounts(shape.total), shape.id


@pytest.fixture
def world(db, admin_user):
    cluster = builders.make_cluster(runtime_classes=copy.deepcopy(KATA) | {"runc": {}})
    return cluster, admin_user


def _template(shape: Shape, admin):
    """The shape as a template; naming a RuntimeClass takes a platform admin's policy exception (pod_security)."""
    spec = builders.template_spec(backend="volcano", pod_sets=copy.deepcopy(shape.pod_sets))
    waive = ["runtimeClassName"] if runtime_classes.names_runtime_class(spec) else []
    return template_versions.create_template(admin, f"t-{shape.id}", "", spec, policy_exceptions=waive)


def _queue_with_limits(want: dict, under: int = 0, **fields):
    """A queue whose finite limits are `want` (KAI units), CPU `under` millicores less."""
    limits = {"cpu_limit": want["cpu"] - under, "memory_limit": max(want["memory"], 1),
              "gpu_limit": max(want["gpu"], 1.0)}
    return builders.make_queue(**limits, **fields)


def _job_row(shape: Shape, cluster, user) -> GangJob:
    """A job as submit stores it; shapes a template cannot express (replicas 0) are written as a row."""
    if shape.submittable:
        version = _template(shape, user)
        queue = _queue_with_limits(kai(shape.total), clusters=[cluster])
        job, _ = job_service.submit(user, builders.submit_body(version, queue, cluster))
        return job
    version = builders.make_template(pod_sets=[builders.pod_set("launcher", 1)])
    queue = builders.make_queue(clusters=[cluster])
    return GangJob.objects.create(name="stored", namespace="default", template_version=version, queue=queue,
                                  cluster=cluster, resolved_spec={"podSets": copy.deepcopy(shape.pod_sets)})


@pytest.mark.parametrize("shape", SHAPES, ids=[s.id for s in SHAPES])
def test_every_consumer_counts_the_same_request(shape, world, client, enqueued, queue_syncs):
    cluster, user = world
    want = numbers(shape.total)
    want_kai = kai(shape.total)

    # the one module
    assert resources.as_numbers(resources.gang_requests(shape.pod_sets, runtime_classes.overheads(cluster))) == want
    assert [resources.as_numbers(p) for p in resources.per_pod(shape.pod_sets, runtime_classes.overheads(cluster))] \
        == [numbers(p) for p in shape.per_pod]

    # submit: stored totals (queue usage, cluster in-use), and the queue-limit check that let it in
    job = _job_row(shape, cluster, user)
    job.refresh_from_db()
    assert (job.requested_gpu, job.requested_cpu_millicores, job.requested_memory_bytes) == (
        want_kai["gpu"], want_kai["cpu"], math.ceil(amounts(shape.total).get("memory", 0)))
    assert queue_limits.job_request(job.resolved_spec, job.cluster) == want_kai
    GangJob.objects.filter(pk=job.pk).update(phase=GangPhase.RUNNING)
    usage = queue_usage.estimated_usage(queue_ids=[job.queue_id])[job.queue_id]
    assert usage["allocated"] == usage["requested"] == {
        "gpu": want_kai["gpu"], "cpu": want_kai["cpu"], "memory": job.requested_memory_bytes / 10**6}
    assert cluster_usage.in_use(cluster.id) == {
        GPU: want.get(GPU, 0), "cpu": want["cpu"], "memory": math.ceil(amounts(shape.total).get("memory", 0))}

    # minResources of the backends that send one
    for plugin in ("volcano-v1beta1", "coscheduling-v1alpha1"):
        backend = registry.by_name(plugin)()
        [gang] = backend.build_gang_objects(desired.gang_spec(job))
        assert numbers(gang["spec"]["minResources"]) == {k: v for k, v in want.items() if v}, plugin

    # why-pending and the capacity facts
    overheads = runtime_classes.for_job(job)
    assert why_pending.job_requests(job.resolved_spec, overheads) == want
    assert capacity.pod_requests(job.resolved_spec, overheads) == [numbers(p) for p in shape.per_pod]

    # the job page ("Asks for") and its numbers
    assert requests_of_spec(job.resolved_spec, overheads) == {k: float(v) for k, v in want_kai.items()}
    client.force_login(user)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    asks = re.search(r"<dt>Asks for</dt><dd>(.*?)</dd>", page).group(1)
    assert asks.endswith(" · ".join(for_people(r, want_kai[r]) for r in ("gpu", "cpu", "memory")))

    # the template preview (no cluster: a RuntimeClass's overhead is added where the job runs)
    if shape.submittable:
        shown = preview(job.template_version.spec)
        assert shown.asks == {k: float(v) for k, v in kai(shape.preview_total or shape.total).items()}
        assert shown.runtime_class_names == sorted({p["template"]["spec"]["runtimeClassName"] for p in shape.pod_sets
                                                    if "runtimeClassName" in p["template"]["spec"]})


@pytest.mark.parametrize("shape", [s for s in SHAPES if s.submittable], ids=[s.id for s in SHAPES if s.submittable])
def test_submit_move_and_resubmit_refuse_a_queue_one_millicore_short(shape, world, enqueued, queue_syncs):
    cluster, user = world
    want = kai(shape.total)
    version = _template(shape, user)
    tight = _queue_with_limits(want, under=1, clusters=[cluster])
    with pytest.raises(ValidationError) as refused:
        job_service.submit(user, builders.submit_body(version, tight, cluster))
    assert f"job requests {want['cpu']} millicores" in str(refused.value)
    assert not GangJob.objects.filter(queue=tight).exists()

    fits = _queue_with_limits(want, clusters=[cluster])
    job, _ = job_service.submit(user, builders.submit_body(version, fits, cluster))
    with pytest.raises(ValidationError) as moved:  # move: the same check against the new queue
        job_service.update(user, job, {"queue": tight.name})
    assert f"job requests {want['cpu']} millicores" in str(moved.value)
    job.refresh_from_db()
    assert job.queue_id == fits.id

    GangJob.objects.filter(pk=job.pk).update(phase=GangPhase.CANCELLED)
    fits.cpu_limit = want["cpu"] - 1
    fits.save(update_fields=["cpu_limit"])
    with pytest.raises(ValidationError) as again:  # resubmit: the same check against today's limit
        job_service.resubmit(user, GangJob.objects.get(pk=job.pk))
    assert f"job requests {want['cpu']} millicores" in str(again.value)


def test_a_template_with_replicas_0_is_refused_naming_the_field(db):
    [shape] = [s for s in SHAPES if s.id == "replicas-0"]
    with pytest.raises(ValidationError) as refused:
        builders.make_template(pod_sets=copy.deepcopy(shape.pod_sets))
    assert "spec.podSets[1].replicas" in refused.value.message_dict


def test_an_unreadable_spec_asks_nothing_everywhere():
    bad = {"podSets": [{"name": "w", "replicas": 1, "template": {"spec": {
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "lots"}}}]}}}]}
    assert why_pending.job_requests(bad) == {}
    assert capacity.pod_requests(bad) == [{}]
    assert requested_totals(bad) == (0.0, 0, 0)
    assert requests_of_spec(bad) == {"gpu": 0.0, "cpu": 0.0, "memory": 0.0}
    with pytest.raises(ValidationError) as named:
        resources.spec_requests(bad)
    assert "podSets[0].template.spec.containers[0].resources.requests.cpu" in named.value.message_dict
