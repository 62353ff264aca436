"""Resource requests of a pod and of a gang (minResources), with Kubernetes' own rules.

The effective request of a pod is what kube-scheduler accounts for (`k8s.io/component-helpers/resource`
`PodRequests`, with sidecar containers, KEP-753):

- regular containers are summed;
- a restartable init container (`restartPolicy: Always`, a native sidecar) keeps running, so it is added to
  the sum and to every init container that starts after it;
- the pod needs the larger of that sum and the biggest init-phase peak;
- the pod overhead (`spec.overhead`, from its RuntimeClass) is added on top.

A container without a request for a resource uses its limit (the API server defaults requests from limits).
Every resource name is kept (cpu, memory, nvidia.com/gpu, ephemeral-storage, ...). Amounts are Decimals in base
units (cores, bytes, devices); quantity parsing is `kubernetes.utils.parse_quantity`. Inputs are never mutated.
"""
from __future__ import annotations

from decimal import Decimal

from kubernetes.utils import parse_quantity

from .quantities import format_quantity

Resources = dict[str, Decimal]


def container_requests(container: dict) -> Resources:
    """Requests of one container dict, a missing request falling back to the limit. Units: base units."""
    resources = container.get("resources") or {}
    requests = resources.get("requests") or {}
    limits = resources.get("limits") or {}
    return {name: parse_quantity(requests[name] if name in requests else limits[name])
            for name in {*requests, *limits}}


def _add(total: Resources, more: Resources) -> Resources:
    out = dict(total)
    for name, amount in more.items():
        out[name] = out.get(name, Decimal(0)) + amount
    return out


def _max(a: Resources, b: Resources) -> Resources:
    return {name: max(a.get(name, Decimal(0)), b.get(name, Decimal(0))) for name in {*a, *b}}


def pod_requests(pod_spec: dict) -> Resources:
    """Effective requests of one pod (a core/v1 PodSpec dict), as kube-scheduler counts them."""
    total: Resources = {}
    for container in pod_spec.get("containers") or []:
        total = _add(total, container_requests(container))
    sidecars: Resources = {}
    init_peak: Resources = {}
    for container in pod_spec.get("initContainers") or []:
        own = container_requests(container)
        if container.get("restartPolicy") == "Always":
            total = _add(total, own)
            sidecars = _add(sidecars, own)
            phase = sidecars
        else:
            phase = _add(own, sidecars)
        init_peak = _max(init_peak, phase)
    total = _max(total, init_peak)
    overhead = {name: parse_quantity(q) for name, q in (pod_spec.get("overhead") or {}).items()}
    return _add(total, overhead)


def gang_requests(pod_sets) -> Resources:
    """Sum over pod sets of pod_requests(template.spec) × replicas. `pod_sets`: [{"replicas", "template"}]."""
    total: Resources = {}
    for ps in pod_sets:
        per_pod = pod_requests((ps.get("template") or {}).get("spec") or {})
        total = _add(total, {name: amount * ps["replicas"] for name, amount in per_pod.items()})
    return total


def as_resource_list(resources: Resources) -> dict[str, str]:
    """A ResourceList dict of canonical quantity strings, e.g. {"cpu": "8", "nvidia.com/gpu": "2"}; zeros dropped."""
    return {name: format_quantity(amount, name) for name, amount in sorted(resources.items()) if amount}
