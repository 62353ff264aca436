"""A small, realistic data set for screenshots: a queue tree with warnings, jobs in every phase, a stuck job
with a KAI OverLimit why-pending, and one job with pods, events and the objects sent to the cluster."""
from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from scheduling.choices import ClusterHealth, GangPhase
from scheduling.models import Cluster, GangJob, PhaseTransition
from tests import builders

SERVED = ["batch/v1", "scheduling.k8s.io/v1", "scheduling.k8s.io/v1alpha2", "scheduling.run.ai/v2",
          "scheduling.run.ai/v2alpha2", "scheduling.x-k8s.io/v1alpha1", "scheduling.volcano.sh/v1beta1"]


def _transitions(job, steps, start):
    """Replace a job's history with `steps` [(phase, seconds after start, reason)] and set its phase."""
    PhaseTransition.objects.filter(job=job).delete()
    for phase, offset, reason in steps:
        PhaseTransition.objects.create(job=job, phase=phase, at=start + timedelta(seconds=offset),
                                       source="PodGroup default/" + job.name if phase != "Submitted" else "gangweb",
                                       reason=reason)
    last_phase, last_offset, _ = steps[-1]
    GangJob.objects.filter(pk=job.pk).update(phase=last_phase, phase_changed_at=start + timedelta(seconds=last_offset))


def populate(user):
    """Create the demo data; returns the showcased running job."""
    now = timezone.now()
    local = builders.make_cluster("local", health=ClusterHealth.HEALTHY, server_version="v1.36.3",
                                  served_apis=SERVED, available_backends=["k8s-workload-v1alpha2", "kai-v2alpha2"],
                                  last_probe_at=now)
    builders.make_cluster("gpu-east", health=ClusterHealth.UNREACHABLE, server_version="v1.35.2",
                          health_message="connection refused (10.0.0.12:6443)")
    Cluster.objects.filter(name="local").update(kubeconfig="(demo)")
    research = builders.make_queue("research", display_name="Research department", gpu_quota=32, gpu_limit=40,
                                   cpu_quota=256000, memory_quota=1024000, clusters=[local])
    nlp = builders.make_queue("team-nlp", parent=research, gpu_quota=16, cpu_quota=128000, memory_quota=640000,
                          clusters=[local])
    builders.make_queue("team-vision", parent=research, gpu_quota=20, gpu_limit=24, cpu_quota=64000,
                        memory_quota=384000, clusters=[local])
    pretrain = builders.make_queue("nlp-pretrain", parent=nlp, gpu_quota=8, gpu_limit=12, cpu_quota=64000,
                                   memory_quota=512000, clusters=[local])
    evals = builders.make_queue("nlp-eval", parent=nlp, gpu_quota=8, cpu_quota=16000, memory_quota=128000,
                                clusters=[local])
    builders.make_queue("sandbox", gpu_quota=0, gpu_limit=0, clusters=[local])
    vision = research.children.get(name="team-vision")

    llm = builders.make_template("llm-pretrain", pod_sets=[
        builders.pod_set("launcher", replicas=1, containers=[builders.container(cpu="2", memory="4Gi")]),
        builders.pod_set("worker", replicas=4, containers=[builders.container(cpu="8", memory="64Gi", gpu=2)])],
        overridable=["podSets.*.replicas", "podSets.*.resources", "priorityClassName"])
    vit = builders.make_template("vit-finetune", pod_sets=[
        builders.pod_set("worker", replicas=2, containers=[builders.container(cpu="4", memory="32Gi", gpu=1)])])

    def job(template, queue, name, phase, ago, **fields):
        j = builders.make_job(template, queue, local, name=name, phase=phase, user=user,
                              at=now - timedelta(seconds=ago))
        if fields:
            GangJob.objects.filter(pk=j.pk).update(**fields)
        return j

    showcase = job(llm, pretrain, "llama-8b-pretrain", GangPhase.RUNNING, 0)
    _transitions(showcase, [("Submitted", 0, "Submitted"), ("Dispatched", 0.4, "GangCreated"),
                            ("Queued", 0.9, "WaitingForScheduler"), ("Scheduled", 47, "PodGroupScheduled"),
                            ("Running", 61, "AllPodsRunning")], now - timedelta(seconds=260))
    pods = [{"name": f"llama-8b-pretrain-worker-{i}-x7k2p", "node": f"kwok-node-{i % 4}", "phase": "Running"}
            for i in range(4)] + [{"name": "llama-8b-pretrain-launcher-0-m2q9r", "node": "kwok-node-0",
                                   "phase": "Running"}]
    objects = [{"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "Workload",
                "metadata": {"name": "llama-8b-pretrain-5f2c1a", "namespace": "default",
                             "labels": {"app.kubernetes.io/managed-by": "gangweb"}},
                "spec": {"podGroupTemplates": [{"name": "gang", "schedulingPolicy": {"gang": {"minCount": 5}}}]}}]
    GangJob.objects.filter(pk=showcase.pk).update(
        observed={"pods": pods, "pod_counts": {"Running": 5}, "objects": objects},
        backend_plugin="k8s-workload-v1alpha2")

    job(llm, pretrain, "llama-70b-sft", GangPhase.QUEUED, 3600, why_pending={
        "reason": "OverLimit", "source": "PodGroup default/llama-70b-sft-9c1e",
        "message": "nlp-pretrain quota has reached the allowable limit of GPUs. Limit is 12 GPUs, currently 8 GPUs "
                   "allocated and workload requested 8 GPUs",
        "summary": "Queue nlp-pretrain: 8 of 12 GPUs in use, limit 12, this gang needs 8.",
        "blocking": [{"code": "QueueOverLimit", "queue": "nlp-pretrain", "resource": "nvidia.com/gpu", "in_use": 8,
                      "limit": 12, "needs": 8,
                      "message": "queue nlp-pretrain: 8 of 12 GPUs in use, limit 12, this gang needs 8"}],
        "pods": {"bound": 0, "required": 5, "total": 5, "created": 5},
        "queue": {"name": "nlp-pretrain", "resources": {"nvidia.com/gpu": {"quota": 8, "limit": 12, "allocated": 8,
                                                                           "requested": 16}}},
        "job_requests": {"nvidia.com/gpu": 8, "cpu": 34, "memory": 279172874240},
        "pod_conditions": [{"reason": "Unschedulable", "pods": 5, "example": "llama-70b-sft-worker-0-k2x8d",
                            "message": "0/4 nodes are available: pod group is not ready, 4 of 5 pods are pending."}]},
        phase_reason="OverLimit")
    for i in range(3):
        job(vit, vision, f"vit-sweep-{i}", GangPhase.RUNNING, 900 + i * 60)
    job(vit, vision, "vit-sweep-3", GangPhase.SCHEDULED, 30)
    job(vit, vision, "vit-sweep-4", GangPhase.QUEUED, 20)
    job(vit, evals, "bert-eval", GangPhase.SUCCEEDED, 7200)
    job(vit, evals, "bert-eval-2", GangPhase.FAILED, 5400, phase_reason="BackoffLimitExceeded",
        phase_message="Job has reached the specified backoff limit (pod worker-1 exited with code 137: OOMKilled)")
    job(vit, evals, "scratch", GangPhase.CANCELLED, 3000)
    job(vit, evals, "bert-tokenize", GangPhase.SUBMITTED, 2)
    report_queue_status(local, now)
    return GangJob.objects.get(pk=showcase.pk)


def report_queue_status(cluster, now):
    """What the queue sync reads back from KAI: status.allocated / requested per Queue (KAI units), one drift."""
    from scheduling.choices import SyncState
    from scheduling.models import QueueClusterState, QueuePolicy, QueueUsageSample

    reported = {  # name: (allocated gpu, requested gpu)
        "nlp-pretrain": (8, 16), "nlp-eval": (0, 2), "team-nlp": (8, 18), "team-vision": (8, 10),
        "research": (16, 28), "sandbox": (0, 0),
    }
    for policy in QueuePolicy.objects.all():
        gpu_alloc, gpu_req = reported[policy.name]
        status = {"allocated": {"gpu": gpu_alloc, "cpu": gpu_alloc * 4250, "memory": gpu_alloc * 34_360},
                  "requested": {"gpu": gpu_req, "cpu": gpu_req * 4250, "memory": gpu_req * 34_360}}
        drifted = policy.name == "team-vision"
        QueueClusterState.objects.create(
            policy=policy, cluster=cluster, state=SyncState.IN_SYNC, last_synced_at=now, status=status,
            status_at=now, last_drift=[{"field": "resources.gpu.limit", "expected": 24, "found": 32}] if drifted
            else [], last_drift_at=now - timedelta(minutes=7) if drifted else None)
    # A day of readings for nlp-pretrain: a training run from 06:00 to 14:00 ago, then the current one.
    pretrain = QueuePolicy.objects.get(name="nlp-pretrain")
    steps = [(24, 0, 0), (18, 8, 8), (16, 12, 20), (10, 4, 4), (6, 0, 0), (1, 8, 16)]
    QueueUsageSample.objects.bulk_create(
        QueueUsageSample(policy=pretrain, cluster=cluster, at=now - timedelta(hours=h, minutes=-1),
                         allocated_gpu=a, requested_gpu=r) for h, a, r in steps)


def events(job):
    """Event rows (scheduling/observe/events.row shape) for the showcased job's page; the demo cluster has no
    API server to read them from."""
    at = job.created_at.isoformat()
    return [
        {"type": "Warning", "reason": "FailedScheduling", "kind": "Pod", "count": 4, "first_at": at, "last_at": at,
         "object": "Pod llama-8b-pretrain-worker-3-x7k2p",
         "message": "0/4 nodes are available: 4 Insufficient nvidia.com/gpu. preemption: 0/4 nodes are available."},
        {"type": "Normal", "reason": "Scheduled", "kind": "Pod", "count": 1, "first_at": at, "last_at": at,
         "object": "Pod llama-8b-pretrain-worker-3-x7k2p",
         "message": "Successfully assigned default/llama-8b-pretrain-worker-3-x7k2p to kwok-node-3"},
        {"type": "Normal", "reason": "SuccessfulCreate", "kind": "Job", "count": 1, "first_at": at, "last_at": at,
         "object": "Job llama-8b-pretrain-worker-71b83c79",
         "message": "Created pod: llama-8b-pretrain-worker-0-x7k2p"},
    ]
