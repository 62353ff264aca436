"""gangweb's own tenant controls (level "tenant" in `pod_security.CONTROLS`: service accounts, token automount,
nodeName, schedulerName, runtimeClassName, tolerations, volume types, system- priority classes, device visibility)
as pure functions on a pod template, and `check_pod`: the Pod Security Standard and these together.
"""
from __future__ import annotations

from dataclasses import dataclass

from .pod_security import (
    CONTROL_PLANE_TAINTS,
    CONTROLS,
    DEFAULT_SERVICE_ACCOUNT,
    DEVICE_HIDING_VALUES,
    DEVICE_VISIBILITY_ENV,
    TENANT_VOLUME_SOURCES,
    Violation,
    _d,
    _in,
    _l,
    _name,
    _Pod,
    _short,
    check_standard,
)


@dataclass(frozen=True)
class TenantRules:
    """What a queue lets its pods use beyond the standard: `service_accounts` besides "default"."""

    service_accounts: frozenset[str] = frozenset()


def check_tenant(template, rules: TenantRules, exceptions=()) -> list[Violation]:
    """Violations of gangweb's tenant controls (level "tenant" in CONTROLS) by one pod template, skipping
    `exceptions`. The backend's own `schedulerName` is stamped after this check (reconcile/desired.py), so the
    control sees only what a template or a job wrote."""
    pod = _Pod(template)
    spec = pod.spec
    found: list[Violation] = []

    def add(control, path, message):
        if control not in exceptions:
            found.append(Violation(control, path, message))

    allowed_accounts = {DEFAULT_SERVICE_ACCOUNT, *rules.service_accounts}
    for key in ("serviceAccountName", "serviceAccount"):  # serviceAccount: the deprecated alias, same effect
        account = spec.get(key)
        if account not in (None, "") and not _in(account, allowed_accounts):
            add("serviceAccountName", f"spec.{key}", f"{_short(account)} is not among the queue's service accounts "
                                                     f"({', '.join(sorted(allowed_accounts))})")
    if spec.get("automountServiceAccountToken") is True:
        add("automountServiceAccountToken", "spec.automountServiceAccountToken",
            "must not be true; leave it unset so the service account's own setting applies")
    for i, vol in enumerate(_l(spec.get("volumes"))):
        vol = _d(vol)
        for j, source in enumerate(_l(_d(vol.get("projected")).get("sources"))):
            if _d(source).get("serviceAccountToken") is not None:
                add("automountServiceAccountToken", f"spec.volumes[{_name(vol, i)}].projected.sources[{j}]."
                    "serviceAccountToken", "projects a service account token, which the pod must not mount")
        kinds = [k for k, v in vol.items() if k not in ("name", "hostPath") and v is not None]
        if vol.get("hostPath") is None and any(k not in TENANT_VOLUME_SOURCES for k in kinds):
            kind = next(k for k in kinds if k not in TENANT_VOLUME_SOURCES)
            add("volumeTypes", f"spec.volumes[{_name(vol, i)}].{kind}",
                f"volume type {kind} is not allowed; use {', '.join(sorted(TENANT_VOLUME_SOURCES))}")
    for key in ("nodeName", "schedulerName", "runtimeClassName"):
        if spec.get(key) not in (None, ""):
            add(key, f"spec.{key}", f"must not be set by a template ({CONTROLS[key].source.split(': ', 1)[-1]})")
    for i, tol in enumerate(_l(spec.get("tolerations"))):
        tol = _d(tol)
        if tol.get("operator") == "Exists" and tol.get("key") in (None, ""):
            add("tolerations", f"spec.tolerations[{i}]", "operator Exists without a key tolerates every taint")
        elif tol.get("key") in CONTROL_PLANE_TAINTS:
            add("tolerations", f"spec.tolerations[{i}].key", "must not tolerate the control plane's taint")
    if isinstance(spec.get("priorityClassName"), str) and spec["priorityClassName"].startswith("system-"):
        add("priorityClassName", "spec.priorityClassName", "system- priority classes are the cluster's own")
    for at, container in pod.containers:
        for i, var in enumerate(_l(container.get("env"))):
            var = _d(var)
            name = var.get("name")
            hides = var.get("valueFrom") is None and var.get("value") in (None, *DEVICE_HIDING_VALUES)
            if isinstance(name, str) and name in DEVICE_VISIBILITY_ENV and not hides:
                add("deviceVisibilityEnv", f"{at}.env[{i}]", f"{_short(name)} must not be set: the container "
                    "runtime would expose devices the pod did not request; request them as resources instead")
    return found


def check_pod(template, level: str, rules: TenantRules, exceptions=()) -> list[Violation]:
    """`check_standard` then `check_tenant`: every violation of one pod template."""
    return check_standard(template, level, exceptions) + check_tenant(template, rules, exceptions)
