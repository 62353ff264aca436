"""Every waiting job gets a cause with numbers, against the real control plane: pods the API server refuses to
create (a missing PriorityClass or RuntimeClass, an exhausted ResourceQuota), free room split over nodes, a
scheduling gate gangweb did not add, and a scheduler that never acts. Each test asserts the why_pending summary a
user reads, and the submit warnings where gangweb could tell in advance.

The owner Jobs' FailedCreate events are read by a reconcile pass (or a watch observation) once the Job is older
than `reconcile.refusals.GRACE_SECONDS`; the tests run passes until the cause shows, as the periodic resync would.
"""
from __future__ import annotations

import uuid

import pytest
from kubernetes import client

localcluster = pytest.importorskip("localcluster")

from scheduling.models import ClusterNodes, GangJob, QueuePolicy  # noqa: E402
from scheduling.reconcile.cluster_watcher import POD  # noqa: E402
from scheduling.services.jobs import lifecycle as job_service  # noqa: E402
from scheduling.services.templates import versions as template_versions  # noqa: E402
from tests import builders  # noqa: E402

from .reconcile_support import wait_for  # noqa: E402

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]

POOL_LABEL = "gangweb.io/test-pool"


def submit(world, *, backend="k8s-workload", replicas=2, gpu=None, pod_spec=None, priority="", name=None,
           waive=()):
    """Submit a one-pod-set job into the test namespace (not reconciled); returns (job, its submit warnings).
    `waive`: tenant controls the (admin-made) template is excepted from (podspec/tenant_controls.py)."""
    ps = builders.pod_set("worker", replicas=replicas,
                          containers=[builders.container(cpu="100m", memory="64Mi", gpu=gpu)])
    ps["template"]["spec"].update(pod_spec or {})
    version = template_versions.create_template(world.user, f"t-{uuid.uuid4().hex[:8]}", "",
                                               builders.template_spec(backend=backend, pod_sets=[ps]),
                                               policy_exceptions=list(waive))
    body = builders.submit_body(version, QueuePolicy.objects.get(name="team-a"), world.cluster,
                                name=name or f"job-{uuid.uuid4().hex[:6]}", namespace=world.namespace,
                                **({"priority_class_name": priority} if priority else {}))
    job, _ = job_service.submit(world.user, body)
    warnings = job.submit_warnings
    return GangJob.objects.select_related("cluster", "queue").get(pk=job.pk), warnings


def why_with(world, job, code: str, timeout: float = 60) -> dict:
    """Run reconcile passes until the job's why_pending carries a blocking fact `code`; returns why_pending."""
    def ready():
        assert world.reconcile(job).error is None
        why = GangJob.objects.get(pk=job.pk).why_pending or {}
        return why if any(f.get("code") == code for f in why.get("blocking") or []) else None

    return wait_for(ready, timeout=timeout, interval=1, what=f"a {code} fact in why_pending")


def test_a_missing_priority_class_warns_at_submit_and_why_pending_quotes_the_refusal(world):
    """Named in the pod template, the class reaches only the pods (the job's own `priority_class_name` also goes
    into the gang object, whose refusal is a reconcile error with its own why_pending)."""
    job, warnings = submit(world, pod_spec={"priorityClassName": "no-such-priority"})
    assert [(w["code"], w["field"]) for w in warnings] == [
        ("UnknownPriorityClass", "podSets[0].template.spec.priorityClassName")]
    why = why_with(world, job, "PodCreateRefused")
    (fact,) = why["blocking"]
    assert (fact["cause"], fact["created"], fact["total"]) == ("PriorityClass", 0, 2)
    assert "no PriorityClass with name no-such-priority was found" in fact["server_message"]
    assert why["reason"] == "FailedCreate"
    assert why["summary"].startswith(
        "The cluster refuses to create the job's pods (0 of 2 exist) because of a PriorityClass the cluster lacks; "
        f"{fact['object']} says: ")
    assert why["summary"].endswith("no PriorityClass with name no-such-priority was found. Queue: team-a.")


def test_a_missing_runtime_class_warns_at_submit_and_why_pending_quotes_the_refusal(world):
    job, warnings = submit(world, replicas=3, pod_spec={"runtimeClassName": "no-such-runtime"},
                           waive=["runtimeClassName"])
    assert [w["code"] for w in warnings] == ["UnknownRuntimeClass"]
    why = why_with(world, job, "PodCreateRefused")
    fact = why["blocking"][0]
    assert (fact["cause"], fact["created"], fact["total"]) == ("RuntimeClass", 0, 3)
    assert 'RuntimeClass "no-such-runtime" not found' in fact["server_message"]
    assert why["summary"].startswith("The cluster refuses to create the job's pods (0 of 3 exist) because of its "
                                     "RuntimeClass;")


def test_an_exhausted_resource_quota_is_quoted_with_its_numbers(world, kube_api):
    core = client.CoreV1Api(kube_api)
    core.create_namespaced_resource_quota(world.namespace, {
        "metadata": {"name": "gpus"}, "spec": {"hard": {"requests.nvidia.com/gpu": "2"}}})
    wait_for(lambda: (core.read_namespaced_resource_quota("gpus", world.namespace).status.hard or {}),
             timeout=30, what="the quota's status computed")
    job, warnings = submit(world, replicas=2, gpu=3)
    assert warnings == []  # gangweb does not read namespaces' quotas: the cause shows once the pods are refused
    why = why_with(world, job, "PodCreateRefused")
    fact = why["blocking"][0]
    assert (fact["cause"], fact["created"], fact["total"]) == ("ResourceQuota", 0, 2)
    said = fact["server_message"]
    assert "exceeded quota: gpus" in said
    assert "requested: requests.nvidia.com/gpu=3" in said and "limited: requests.nvidia.com/gpu=2" in said
    assert why["summary"].startswith("The cluster refuses to create the job's pods (0 of 2 exist) because of the "
                                     "namespace's ResourceQuota;")
    assert "limited: requests.nvidia.com/gpu=2" in why["summary"]


@pytest.fixture
def pool(kube_cluster, kube_namespace):
    """Four fake 8-GPU nodes labelled for this test only; removed afterwards. Returns their names."""
    names = [f"{kube_namespace[:40]}-n{i}" for i in range(4)]
    for name in names:
        kube_cluster.add_node(name, gpus=8, labels={POOL_LABEL: kube_namespace})
    yield names
    for name in names:
        kube_cluster.remove_node(name, wait=False)


def test_free_room_split_over_nodes_says_what_each_pod_needs_and_the_most_any_node_has(world, watcher, pool):
    """4 nodes with 3 of 8 GPUs taken each (by gangweb jobs pinned one per node); a gang of 3 pods x 6 GPUs: 18
    needed, 20 free in all, but no node has 6."""
    def listed():
        row = ClusterNodes.objects.filter(cluster=world.cluster).first()
        return row is not None and {n["name"] for n in row.nodes} >= set(pool)

    wait_for(listed, timeout=30, what="the pool's nodes in ClusterNodes")
    fillers = []
    for node in pool:
        job, _ = submit(world, replicas=1, gpu=3, pod_spec={"nodeSelector": {"kubernetes.io/hostname": node}})
        assert world.reconcile(job).error is None
        fillers.append(job)
    for job in fillers:
        # The phase may be written by one pass before a later one lists the bound pod: wait for both.
        wait_for(lambda job=job: (row := GangJob.objects.get(pk=job.pk)).phase in ("Scheduled", "Running")
                 and ((row.observed or {}).get("pods") or [{}])[0].get("node"), timeout=60,
                 what="a filler pod bound and observed")
    assert sorted(GangJob.objects.get(pk=j.pk).observed["pods"][0]["node"] for j in fillers) == sorted(pool)

    gang, _ = submit(world, replicas=3, gpu=6, pod_spec={"nodeSelector": {POOL_LABEL: world.namespace}})
    assert world.reconcile(gang).error is None
    why = wait_for(lambda: (w := GangJob.objects.get(pk=gang.pk).why_pending or {}).get("blocking") and w,
                   timeout=60, what="a blocking fact for the gang")
    (fact,) = why["blocking"]
    span = f"{world.namespace[:40]}-n0..3"
    assert fact == {"code": "NodesFragmented", "resource": "nvidia.com/gpu", "per_pod": 6, "pods": 3, "fit": 0,
                    "most_free": 5, "free_total": 20, "most_free_nodes": sorted(pool), "nodes": 4,
                    "message": f"each pod needs 6 GPUs; the most free on any node is 5 ({span} have 5 each, 20 in "
                               "all); an upper bound: gangweb counts only the pods it manages on these nodes"}
    assert why["summary"].startswith(f"Each pod needs 6 GPUs; the most free on any node is 5 ({span} have 5 each, "
                                     "20 in all)")


def test_a_foreign_scheduling_gate_is_named_and_left_alone(world):
    job, _ = submit(world, replicas=2, pod_spec={"schedulingGates": [{"name": "example.com/hold"}]})
    why = why_with(world, job, "ForeignSchedulingGate")
    (fact,) = why["blocking"]
    assert fact == {"code": "ForeignSchedulingGate", "gate": "example.com/hold", "owner": "the job's pod template",
                    "pods": 2,
                    "message": "2 pods held by scheduling gate `example.com/hold` (from the job's pod template); "
                               "gangweb did not add it and will not remove it: whoever added it must remove it"}
    assert why["summary"] == _sentence(fact["message"]) + " Queue: team-a."  # every summary names the queue
    assert world.reconcile(job).error is None  # another pass: the gate stays on every pod
    pods = world.gang(job, POD)
    assert len(pods) == 2
    assert all(p["spec"].get("schedulingGates") == [{"name": "example.com/hold"}] for p in pods)


def test_a_scheduler_nothing_answers_to_is_named_after_the_silence_window(world, settings):
    """No KAI scheduler runs in this cluster. The window is a setting (5 min by default), shortened here."""
    settings.GANGWEB_SCHEDULER_SILENCE_SECONDS = 2
    job, warnings = submit(world, backend="kai", replicas=2)
    # The cluster lists kai-scheduler (its default setting); the probe saw none acting (test_scheduler_presence.py).
    assert [w["code"] for w in warnings] == ["SchedulerNotSeen"]
    why = why_with(world, job, "SchedulerSilent")
    (fact,) = why["blocking"]
    assert (fact["scheduler"], fact["seconds"], fact["pods"]) == ("kai-scheduler", 2, 2)
    assert why["summary"] == ("No scheduler named `kai-scheduler` has acted on these pods in 2 s — is it running in "
                              "this cluster? Queue: team-a.")


def _sentence(clause: str) -> str:
    return clause[:1].upper() + clause[1:] + "."


def test_what_kube_scheduler_keeps_saying_is_on_the_why_pending_answer_with_its_count_and_first_and_last_seen(
        world, settings):
    """Pods whose nodeSelector matches no node: kube-scheduler records FailedScheduling on them (events.k8s.io/v1,
    one Event whose series counts the repeats). A pass reads the first waiting pod's Warning Events
    (reconcile/waiting_events.py) and the answer carries them folded: the count and when first and last seen.
    The read is remembered GANGWEB_WAITING_EVENTS_SECONDS (60 s by default), lowered here: kube-scheduler writes
    the pod's condition before its Event reaches the API server, so a pass may read none at first."""
    settings.GANGWEB_WAITING_EVENTS_SECONDS = 1
    job, _ = submit(world, replicas=2, pod_spec={"nodeSelector": {"gangweb.io/nowhere": world.namespace}})

    def said():
        assert world.reconcile(job).error is None
        why = GangJob.objects.get(pk=job.pk).why_pending or {}
        return [e for e in why.get("said") or [] if e["reason"] == "FailedScheduling"] or None

    (entry,) = wait_for(said, timeout=90, interval=2, what="FailedScheduling on the why-pending answer")
    first_pod = sorted(p["metadata"]["name"] for p in world.gang(job, POD))[0]
    assert entry["object"] == f"Pod {world.namespace}/{first_pod}"
    assert entry["type"] == "Warning" and entry["count"] >= 1
    assert "didn't match Pod's node affinity/selector" in entry["message"]
    assert entry["first_at"] and entry["first_at"] <= entry["last_at"]
