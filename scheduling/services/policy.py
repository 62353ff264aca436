"""Pod-spec policy: what a job or a team's template may not smuggle into a cluster.

The controls are those of the Kubernetes Pod Security Standards "baseline" profile
(https://kubernetes.io/docs/concepts/security/pod-security-standards/) that let a pod escape its container:
privileged containers, host namespaces (hostNetwork, hostPID, hostIPC), hostPath volumes, host ports, added
capabilities, Windows host processes, an unmasked /proc and an unconfined seccomp profile. Also the priority
classes Kubernetes reserves for itself ("system-" prefix: system-node-critical, system-cluster-critical), which
would let a job preempt the cluster's own components.

- Templates of platform admins may use them (an admin owns that decision).
- Templates made by anyone else may not (`check_template_spec`, 403 naming the field).
- A job's resolved spec may use only what its template version already has (`check_job_spec`, 400). Overrides
  cannot reach these fields today; the check keeps it so if the override rules ever grow.
"""
from __future__ import annotations

from django.core.exceptions import ValidationError

from . import access
from .errors import PermissionDenied

HOST_NAMESPACES = ("hostNetwork", "hostPID", "hostIPC")
RESERVED_PRIORITY_PREFIX = "system-"  # k8s reserves it: pkg/apis/scheduling (SystemPriorityClassPrefix)
CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")


def _name(item, index: int) -> str:
    name = item.get("name") if isinstance(item, dict) else None
    return str(name)[:63] if isinstance(name, str) and name else str(index)


def _security_context_escalations(sc, at: str) -> list[tuple[str, str]]:
    found = []
    if not isinstance(sc, dict):
        return found
    if sc.get("privileged") is True:
        found.append((f"{at}.securityContext.privileged", "privileged containers"))
    caps = sc.get("capabilities")
    added = caps.get("add") if isinstance(caps, dict) else None
    if isinstance(added, list):
        for cap in added:
            found.append((f"{at}.securityContext.capabilities.add[{str(cap)[:40]}]", f"added capability {cap}"))
    windows = sc.get("windowsOptions")
    if isinstance(windows, dict) and windows.get("hostProcess") is True:
        found.append((f"{at}.securityContext.windowsOptions.hostProcess", "Windows host processes"))
    if sc.get("procMount") == "Unmasked":
        found.append((f"{at}.securityContext.procMount", "an unmasked /proc"))
    seccomp = sc.get("seccompProfile")
    if isinstance(seccomp, dict) and seccomp.get("type") == "Unconfined":
        found.append((f"{at}.securityContext.seccompProfile", "an unconfined seccomp profile"))
    return found


def _reserved(priority_class) -> bool:
    return isinstance(priority_class, str) and priority_class.startswith(RESERVED_PRIORITY_PREFIX)


def check_priority_class(user, name: str, field: str = "priority_class_name") -> None:
    """Refuse a reserved ("system-") priority class asked for by anyone but a platform admin: 403."""
    if _reserved(name) and not access.is_platform_admin(user):
        raise PermissionDenied({field: f"'{name}' is reserved for the cluster's own components"})


def escalations(spec) -> dict[str, str]:
    """{path: what} for every escalating setting in a template or resolved spec.

    Paths name pod sets, containers and volumes by name (stable between a template and the jobs made from it),
    e.g. "podSets[worker].template.spec.containers[main].securityContext.privileged". Tolerates any shape.
    """
    found: list[tuple[str, str]] = []
    if isinstance(spec, dict) and _reserved(spec.get("priorityClassName")):
        found.append(("priorityClassName", "system priority classes"))
    pod_sets = spec.get("podSets") if isinstance(spec, dict) else None
    for i, ps in enumerate(pod_sets if isinstance(pod_sets, list) else []):
        template = ps.get("template") if isinstance(ps, dict) else None
        pod = template.get("spec") if isinstance(template, dict) else None
        if not isinstance(pod, dict):
            continue
        at = f"podSets[{_name(ps, i)}].template.spec"
        for key in HOST_NAMESPACES:
            if pod.get(key) is True:
                found.append((f"{at}.{key}", f"the host's {key[4:].lower()} namespace ({key})"))
        found.extend(_security_context_escalations(pod.get("securityContext"), at))
        if _reserved(pod.get("priorityClassName")):
            found.append((f"{at}.priorityClassName", "system priority classes"))
        volumes = pod.get("volumes")
        for j, vol in enumerate(volumes if isinstance(volumes, list) else []):
            if isinstance(vol, dict) and "hostPath" in vol:
                found.append((f"{at}.volumes[{_name(vol, j)}].hostPath", "hostPath volumes"))
        for list_name in CONTAINER_LISTS:
            containers = pod.get(list_name)
            for j, c in enumerate(containers if isinstance(containers, list) else []):
                if not isinstance(c, dict):
                    continue
                c_at = f"{at}.{list_name}[{_name(c, j)}]"
                found.extend(_security_context_escalations(c.get("securityContext"), c_at))
                ports = c.get("ports")
                for k, port in enumerate(ports if isinstance(ports, list) else []):
                    if isinstance(port, dict) and port.get("hostPort") not in (None, 0):
                        found.append((f"{c_at}.ports[{k}].hostPort", "host ports"))
    return dict(found)


def check_template_spec(user, spec: dict, field: str = "spec") -> None:
    """Refuse escalating settings in a template unless `user` is a platform admin.

    Raises PermissionDenied({"spec.<path>": "<what>: only allowed in templates made by platform admins"}).
    """
    if access.is_platform_admin(user):
        return
    found = escalations(spec)
    if found:
        path, what = next(iter(found.items()))
        raise PermissionDenied({f"{field}.{path}": f"{what}: only allowed in templates made by platform admins"})


def check_job_spec(resolved: dict, template_spec: dict) -> None:
    """Raise ValidationError naming the field when `resolved` has an escalating setting `template_spec` lacks."""
    allowed = escalations(template_spec)
    for path, what in escalations(resolved).items():
        if path not in allowed:
            raise ValidationError({f"resolved_spec.{path}": f"{what}: not in the template, so not allowed"})
