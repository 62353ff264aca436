"""What a pod, a pod set and a whole gang ask for: gangweb's one request arithmetic.

Every consumer calls this module (queue-limit checks at submit/move/resubmit, `minResources`, the stored request
totals and so queue and cluster usage, the job page and template preview, why-pending and the capacity facts), so
one job has one answer. The semantics are kube-scheduler's, `k8s.io/component-helpers/resource` `PodRequests`
(v0.36.3, `resource/helpers.go`), with the API server's defaulting of a pod (`pkg/apis/core/v1/defaults.go`
`SetDefaults_Pod`, `defaultPodRequests`) and the RuntimeClass admission plugin
(`plugin/pkg/admission/runtimeclass`) applied first, as they are to every pod before the scheduler sees it:

- a container without a request for a resource uses its limit (`SetDefaults_Pod`);
- regular containers are summed; a restartable init container (`restartPolicy: Always`, a native sidecar,
  KEP-753) keeps running, so it is added to that sum and to every init container that starts after it; the pod
  needs the larger of the sum and the biggest init-phase peak (`AggregateContainerRequests`);
- pod-level `spec.resources` (KEP-2837, beta and on since 1.34) replace that aggregate for the resources it
  supports (cpu, memory, hugepages-*): its request, else its limit when no container requests that resource
  (`defaultPodRequests`); other resources (GPUs) still come from the containers (`PodRequests`);
- the pod overhead is added on top: the RuntimeClass's `overhead.podFixed` when the pod names a RuntimeClass the
  cluster defines with one (admission copies it into `spec.overhead`), else the pod's own `spec.overhead`
  (which admission refuses without such a RuntimeClass; counted as written all the same).

Every resource name is kept (cpu, memory, nvidia.com/gpu, ephemeral-storage, ...). Amounts are Decimals in base
units (cores, bytes, devices), parsed by `kube.quantities.parse`; inputs are never mutated. A value that does not
parse raises ValidationError naming the field; readers of stored rows catch `UNREADABLE`.

`runtime_classes` arguments map a RuntimeClass name to its parsed `overhead.podFixed`, as
`kube.runtime_classes.overheads(cluster)` reads them from a cluster's cached list; None when no cluster is known.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import Decimal, InvalidOperation

from django.core.exceptions import ValidationError

from .quantities import format_quantity, parse

Resources = dict[str, Decimal]
RuntimeClasses = Mapping[str, Resources]
# What reading a spec that skipped validation (hand-made rows only) can raise.
UNREADABLE = (ValidationError, AttributeError, KeyError, TypeError, ValueError, InvalidOperation)
# `IsSupportedPodLevelResource`: cpu, memory and every hugepages-<size>.
POD_LEVEL_RESOURCES = ("cpu", "memory")
HUGEPAGES_PREFIX = "hugepages-"


def _parse_list(resource_list: dict | None, field: str) -> Resources:
    return {name: parse(qty, f"{field}.{name}") for name, qty in (resource_list or {}).items()}


def container_requests(container: dict, field: str = "container") -> Resources:
    """Requests of one container dict, a missing request falling back to its limit (`SetDefaults_Pod`).
    Base units. Raises ValidationError({"<field>.resources.requests.cpu": ...}) for an unparseable amount."""
    resources = container.get("resources") or {}
    out = _parse_list(resources.get("limits"), f"{field}.resources.limits")
    out.update(_parse_list(resources.get("requests"), f"{field}.resources.requests"))
    return out


def _add(total: Resources, more: Resources) -> Resources:
    out = dict(total)
    for name, amount in more.items():
        out[name] = out.get(name, Decimal(0)) + amount
    return out


def _max(a: Resources, b: Resources) -> Resources:
    return {name: max(a.get(name, Decimal(0)), b.get(name, Decimal(0))) for name in {*a, *b}}


def _pod_level(name: str) -> bool:
    return name in POD_LEVEL_RESOURCES or name.startswith(HUGEPAGES_PREFIX)


def containers_requests(pod_spec: dict, field: str = "spec") -> Resources:
    """`AggregateContainerRequests`: max(sum of containers + sidecars, each init container + the sidecars started
    before it), per resource, base units."""
    total: Resources = {}
    for i, container in enumerate(pod_spec.get("containers") or []):
        total = _add(total, container_requests(container, f"{field}.containers[{i}]"))
    sidecars: Resources = {}
    init_peak: Resources = {}
    for i, container in enumerate(pod_spec.get("initContainers") or []):
        own = container_requests(container, f"{field}.initContainers[{i}]")
        if container.get("restartPolicy") == "Always":
            total = _add(total, own)
            sidecars = _add(sidecars, own)
            phase = sidecars
        else:
            phase = _add(own, sidecars)
        init_peak = _max(init_peak, phase)
    return _max(total, init_peak)


def pod_overhead(pod_spec: dict, runtime_classes: RuntimeClasses | None = None, field: str = "spec") -> Resources:
    """What the cluster adds to one pod: the named RuntimeClass's `overhead.podFixed` when `runtime_classes` knows
    it with an overhead, else the pod's `spec.overhead` (RuntimeClass admission, `setOverhead`). Base units."""
    name = pod_spec.get("runtimeClassName")
    if runtime_classes and isinstance(name, str) and runtime_classes.get(name):
        return dict(runtime_classes[name])
    return _parse_list(pod_spec.get("overhead"), f"{field}.overhead")


def pod_requests(pod_spec: dict, runtime_classes: RuntimeClasses | None = None, field: str = "spec") -> Resources:
    """Effective requests of one pod (a core/v1 PodSpec dict) as kube-scheduler counts them (`PodRequests`; see
    the module docstring): {resource: Decimal base units}. Raises ValidationError naming the field."""
    total = containers_requests(pod_spec, field)
    pod_level = pod_spec.get("resources") or {}
    pod_requests_ = _parse_list(pod_level.get("requests"), f"{field}.resources.requests")
    pod_limits = _parse_list(pod_level.get("limits"), f"{field}.resources.limits")
    for name in {*pod_requests_, *pod_limits}:
        if not _pod_level(name):
            continue
        if name in pod_requests_:
            total[name] = pod_requests_[name]
        elif name in total and not name.startswith(HUGEPAGES_PREFIX):  # overcommittable: containers' sum stands
            continue
        else:
            total[name] = pod_limits[name]
    return _add(total, pod_overhead(pod_spec, runtime_classes, field))


def _spec_of(pod_set: dict) -> dict:
    return (pod_set.get("template") or {}).get("spec") or {}


def per_pod(pod_sets: Iterable[dict], runtime_classes: RuntimeClasses | None = None) -> list[Resources]:
    """`pod_requests` of one pod of each pod set (`[{"name", "replicas", "template"}]`), in pod-set order."""
    return [pod_requests(_spec_of(ps), runtime_classes, f"podSets[{i}].template.spec")
            for i, ps in enumerate(pod_sets)]


def gang_requests(pod_sets: Iterable[dict], runtime_classes: RuntimeClasses | None = None) -> Resources:
    """Sum over pod sets of `pod_requests` × `replicas` (0 replicas ask nothing): what the whole gang asks, base
    units. `pod_sets`: `[{"replicas", "template"}]` as in a resolved spec's `podSets`."""
    total: Resources = {}
    pod_sets = list(pod_sets)
    for ps, one in zip(pod_sets, per_pod(pod_sets, runtime_classes), strict=True):
        replicas = int(ps.get("replicas") or 0)
        if replicas:  # a pod set of 0 replicas asks nothing, not "0 GPUs"
            total = _add(total, {name: amount * replicas for name, amount in one.items()})
    return total


def spec_requests(resolved_spec: dict | None, runtime_classes: RuntimeClasses | None = None) -> Resources:
    """`gang_requests` of a resolved job spec (`{"podSets": [...]}`)."""
    return gang_requests((resolved_spec or {}).get("podSets") or [], runtime_classes)


def as_resource_list(resources: Resources) -> dict[str, str]:
    """A ResourceList dict of canonical quantity strings, e.g. {"cpu": "8", "nvidia.com/gpu": "2"}; zeros dropped."""
    return {name: format_quantity(amount, name) for name, amount in sorted(resources.items()) if amount}


def as_numbers(resources: Resources) -> dict[str, int | float]:
    """{resource: int when whole, else float}, base units, sorted by name: the JSON shape why-pending and the
    capacity facts store."""
    return {name: int(a) if a == a.to_integral_value() else float(a) for name, a in sorted(resources.items())}
