"""Desired objects of a job: Indexed Jobs, headless Service, labels, and name limits for a 60-character job."""
import re
import uuid

import pytest

from scheduling.backends import registry
from scheduling.models import GangJob, QueuePolicy
from scheduling.reconcile import desired
from scheduling.services.templates import specs as template_service
from tests import builders

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def make_job(name="train", backend="kai", replicas=3, **spec_extra) -> GangJob:
    spec = template_service.validate_template_spec(builders.template_spec(
        backend=backend, pod_sets=[builders.pod_set("worker", replicas=replicas)], **spec_extra))
    resolved = template_service.render(spec, {})
    return GangJob(name=name, namespace="ml", uid=uuid.UUID(int=42), queue=QueuePolicy(name="team-a"),
                   priority_class_name="", resolved_spec=resolved)


def all_label_values(obj):
    meta = obj["metadata"]
    yield from (meta.get("labels") or {}).values()
    template = (obj.get("spec") or {}).get("template")
    if template:
        yield from (template["metadata"].get("labels") or {}).values()


def test_one_indexed_job_per_pod_set_with_rendezvous_service():
    job = make_job(replicas=3)
    backend = registry.by_name("kai-v2alpha2")()
    spec = desired.gang_spec(job)
    [owner] = desired.owners(backend, spec)
    assert owner["spec"]["completionMode"] == "Indexed"
    assert owner["spec"]["completions"] == owner["spec"]["parallelism"] == 3
    pod = owner["spec"]["template"]
    assert pod["spec"]["subdomain"] == spec.service_name
    assert pod["spec"]["restartPolicy"] == "Never"
    # A disrupted (preempted, evicted) member is replaced, not counted against backoffLimit 0.
    assert owner["spec"]["backoffLimit"] == 0
    assert owner["spec"]["podFailurePolicy"] == {
        "rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]}
    assert pod["metadata"]["labels"]["gangweb.io/job-uid"] == str(job.uid)
    assert owner["metadata"]["labels"]["kai.scheduler/skip-podgrouper"] == "true"
    svc = desired.service(spec)
    assert svc["spec"] == {"clusterIP": "None", "publishNotReadyAddresses": True,
                           "selector": {"gangweb.io/job-uid": str(job.uid)}}
    assert spec.min_member == 3 and spec.min_resources == {"cpu": "3", "memory": str(3 * 1024**3)}


@pytest.mark.parametrize("plugin", ["kai-v2alpha2", "k8s-workload-v1alpha2", "coscheduling-v1alpha1",
                                    "volcano-v1beta1"])
def test_a_60_character_job_name_gives_valid_names_and_label_values(plugin):
    job = make_job(name="a" * 30 + "-" + "b" * 29)
    assert len(job.name) == 60
    backend = registry.by_name(plugin)()
    spec = desired.gang_spec(job)
    objs = [*backend.build_gang_objects(spec), *desired.owners(backend, spec), desired.service(spec)]
    for obj in objs:
        name = obj["metadata"]["name"]
        assert DNS_LABEL.match(name) and len(name) <= 63, name
        for value in all_label_values(obj):
            assert LABEL_VALUE.match(value) and len(value) <= 63, value
    for owner in desired.owners(backend, spec):
        assert len(owner["metadata"]["name"]) <= 52
    assert spec.labels["gangweb.io/job"] == job.name


def test_on_failure_pods_get_no_pod_failure_policy():
    """The API server refuses podFailurePolicy unless restartPolicy is Never."""
    job = make_job(replicas=2)
    job.resolved_spec["podSets"][0]["template"]["spec"]["restartPolicy"] = "OnFailure"
    [owner] = desired.owners(registry.by_name("kai-v2alpha2")(), desired.gang_spec(job))
    assert owner["spec"]["template"]["spec"]["restartPolicy"] == "OnFailure"
    assert "podFailurePolicy" not in owner["spec"]


@pytest.mark.parametrize("plugin", ["kai-v2alpha2", "k8s-workload-v1alpha2", "k8s-workload-v1beta1",
                                    "coscheduling-v1alpha1", "volcano-v1beta1"])
@pytest.mark.parametrize("job_name", ["a" * 42, "z" * 63, "run-" * 15 + "end"])
def test_the_longest_names_with_several_pod_sets_give_one_object_per_name_within_limits(plugin, job_name):
    """Issue 19: a 42+ character job name with two pod sets gave both Indexed Jobs one name."""
    pod_sets = [builders.pod_set(n, replicas=r) for n, r in
                [("launcher", 1), ("worker-pool-aaaaaaaa", 10_000), ("worker-pool-aaaaaaab", 2), ("w", 1)]]
    spec = template_service.validate_template_spec(builders.template_spec(backend=registry.by_name(plugin).family,
                                                                          pod_sets=pod_sets))
    job = GangJob(name=job_name, namespace="n" * 63, uid=uuid.UUID(int=42), queue=QueuePolicy(name="q" * 63),
                  priority_class_name="", resolved_spec=template_service.render(spec, {}))
    backend = registry.by_name(plugin)()
    gang_spec = desired.gang_spec(job)
    owners = desired.owners(backend, gang_spec)
    objs = [*backend.build_gang_objects(gang_spec), *owners, desired.service(gang_spec)]
    by_kind: dict[str, list[str]] = {}
    for obj in objs:
        name = obj["metadata"]["name"]
        by_kind.setdefault(obj["kind"], []).append(name)
        assert DNS_LABEL.match(name) and len(name) <= 63, name
        for value in all_label_values(obj):
            assert LABEL_VALUE.match(value) and len(value) <= 63, value
    assert all(len(set(v)) == len(v) for v in by_kind.values()), by_kind
    assert len(by_kind["Job"]) == 4
    for owner in owners:
        name = owner["metadata"]["name"]
        assert len(name) <= 52, name
        # The Job controller's pod hostname `<job>-<index>` and label batch.kubernetes.io/job-name stay <= 63.
        assert len(f"{name}-{owner['spec']['completions'] - 1}") <= 63
        assert owner["metadata"]["labels"]["gangweb.io/pod-set"] in name
