"""The desired cluster objects of a job, computed from the job row alone (pure: no API calls, no writes).

- `gang_spec(job)`: the GangSpec a backend builds its gang objects from;
- `owners(backend, spec)`: one `batch/v1` Indexed Job per pod set (completions = parallelism = replicas) with the
  backend-stamped pod template, and the headless rendezvous Service (pods resolve each other as
  `<job>-<index>.<service>`, the Indexed Job hostname convention);
- `job_labels_from(name, uid)`: the labels every object of the job carries.
"""
from __future__ import annotations

import copy

from django.conf import settings

from ..backends.base import GangSpec, PodSetSpec, SchedulerBackend, gang_minimum, set_minimum
from ..constants import (
    DEFAULT_SCHEDULE_TIMEOUT_SECONDS,
    KAI_DURATIONS,
    LABEL_INSTANCE,
    LABEL_JOB,
    LABEL_JOB_UID,
    LABEL_MANAGED_BY,
    LABEL_POD_SET,
    MANAGED_BY_VALUE,
)
from ..kube import limit_ranges, resources, runtime_classes
from ..kube.objects import JOB, SERVICE
from . import names


def instance_label() -> str:
    """This gangweb install's `gangweb.io/instance` value."""
    return names.label_value(settings.GANGWEB_INSTANCE) or "gangweb"


def gang_spec(job, limit_defaults: dict | None = None) -> GangSpec:
    """The GangSpec of `job` at its current `gang_generation` (names change with the generation). `limit_defaults`
    ({"limits", "requests"} of the job's namespace, `kube.limit_ranges.defaults`) are counted in `min_resources` for
    containers that set no request: the LimitRanger adds them at admission (the pod templates keep the template's).
    `min_resources` counts each pod set's minimum pods (`set_minimum`: its replicas unless it states fewer)."""
    resolved = job.resolved_spec
    uid, gen = str(job.uid), job.gang_generation
    owner_names = names.owner_names(job.name, [ps["name"] for ps in resolved["podSets"]], uid, gen,
                                    job.owner_uids)
    pod_sets = tuple(
        PodSetSpec(name=ps["name"], replicas=ps["replicas"], min_member=set_minimum(ps),
                   template=ps["template"], owner_name=owner_names[ps["name"]])
        for ps in resolved["podSets"])
    gang = resolved.get("gang") or {}
    return GangSpec(
        job_name=job.name, namespace=job.namespace, uid=uid, generation=gen,
        gang_name=names.gang_name(job.name, uid, gen), service_name=names.service_name(job.name, uid, gen),
        queue=job.queue.name, priority_class_name=job.priority_class_name or "",
        preemptibility=resolved.get("preemptibility") or "", topology=resolved.get("topologyConstraint") or None,
        min_member=gang_minimum(resolved),
        schedule_timeout_seconds=gang.get("scheduleTimeoutSeconds") or DEFAULT_SCHEDULE_TIMEOUT_SECONDS,
        # What the gang's minimum asks: each pod set's minimum pods (an optional set's pods are not required).
        min_resources=resources.as_resource_list(resources.gang_requests(
            [{**ps, "replicas": set_minimum(ps)} for ps in limit_ranges.with_defaults(resolved["podSets"],
                                                                                      limit_defaults)],
            runtime_classes.for_job(job))),
        pod_sets=pod_sets, labels=job_labels_from(job.name, uid), disruption_mode=gang.get("disruptionMode") or "",
        durations={k: gang[k] for k in KAI_DURATIONS if gang.get(k) is not None},
        scheduler_name=job.cluster.scheduler_name_for(resolved.get("backend", "")) if job.cluster_id else "",
    )


def job_labels_from(job_name: str, uid: str) -> dict:
    """{managed-by: gangweb, instance, job name (as a label value), job UID}: the labels every object of a job carries
    (from the name and UID alone: GangSpec is built without touching other job fields)."""
    return {LABEL_MANAGED_BY: MANAGED_BY_VALUE, LABEL_INSTANCE: instance_label(),
            LABEL_JOB: names.label_value(job_name), LABEL_JOB_UID: uid}


def pod_template(backend: SchedulerBackend, spec: GangSpec, pod_set: PodSetSpec) -> dict:
    """The pod template of one pod set (`SchedulerBackend.job_pod_template`): the job's labels, the rendezvous
    subdomain, restartPolicy Never unless the template says OnFailure, then the backend's stamp."""
    return backend.job_pod_template(spec, pod_set)


# A member that fails because it was disrupted (preempted, evicted by the Eviction API, its node drained or lost:
# the pod condition `DisruptionTarget`, Kubernetes "Pod disruption conditions") is not the workload failing. The
# Job controller replaces it without counting it against backoffLimit, so the gang waits for the scheduler again
# (re-queued) instead of failing. Source: batch/v1 JobSpec.podFailurePolicy, action Ignore; allowed only with
# restartPolicy Never.
IGNORE_DISRUPTIONS = {"rules": [{"action": "Ignore",
                                  "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]}


def owners(backend: SchedulerBackend, spec: GangSpec, suspend: bool = False) -> list[dict]:
    """One Indexed Job per pod set, in pod-set order. backoffLimit 0: a gang with a failed member has failed,
    unless the member was disrupted (`IGNORE_DISRUPTIONS`, with restartPolicy Never): then it is replaced. With
    `suspend` (a backend that holds pods until its queue manager admits the gang, and it has not), `spec.suspend:
    true`: the Job controller makes no pod until gangweb un-suspends it (reconcile/jobs/admission.py)."""
    extra = backend.owner_metadata(spec)
    jobs = []
    for ps in spec.pod_sets:
        meta = {"name": ps.owner_name, "namespace": spec.namespace,
                "labels": {**spec.labels, LABEL_POD_SET: ps.name, **extra.get("labels", {})}}
        if extra.get("annotations"):
            meta["annotations"] = dict(extra["annotations"])
        template = pod_template(backend, spec, ps)
        job_spec = {"completionMode": "Indexed", "completions": ps.replicas, "parallelism": ps.replicas,
                    "backoffLimit": 0, "template": template}
        if template["spec"]["restartPolicy"] == "Never":
            job_spec["podFailurePolicy"] = copy.deepcopy(IGNORE_DISRUPTIONS)
        if suspend:
            job_spec["suspend"] = True
        jobs.append({"apiVersion": JOB.api_version, "kind": JOB.kind, "metadata": meta, "spec": job_spec})
    return jobs


def service(spec: GangSpec) -> dict:
    """The headless Service selecting every pod of the job (also before they are ready: rendezvous)."""
    return {
        "apiVersion": SERVICE.api_version, "kind": SERVICE.kind,
        "metadata": {"name": spec.service_name, "namespace": spec.namespace, "labels": dict(spec.labels)},
        "spec": {"clusterIP": "None", "publishNotReadyAddresses": True, "selector": {LABEL_JOB_UID: spec.uid}},
    }
