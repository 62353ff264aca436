"""The backend registry: a plain mapping from plugin name to plugin class.

Templates name a backend *family* ("kai", "k8s-workload", "coscheduling", "volcano"); each family has one
plugin per API version, and `select` picks the highest version the cluster serves (KubeRay-style discovery). The
k8s-workload family has v1beta1 (Kubernetes 1.37) above v1alpha2 (1.36); a cluster upgraded from one to the other
moves its jobs across (reconcile/jobs.py `JobReconciler.retire`).
"""
from __future__ import annotations

from collections.abc import Iterable

from django.core.exceptions import ImproperlyConfigured

# Family -> plugin classes' dotted paths, highest API version first. A new version is one more line.
FAMILIES: dict[str, list[str]] = {
    "kai": ["scheduling.backends.kai_v2alpha2.KaiV2alpha2"],
    "k8s-workload": ["scheduling.backends.k8s_workload_v1beta1.K8sWorkloadV1beta1",
                     "scheduling.backends.k8s_workload_v1alpha2.K8sWorkloadV1alpha2"],
    "coscheduling": ["scheduling.backends.coscheduling_v1alpha1.CoschedulingV1alpha1"],
    "volcano": ["scheduling.backends.volcano_v1beta1.VolcanoV1beta1"],
}


def family_names() -> list[str]:
    """Names a template's `backend` field may take."""
    return sorted(FAMILIES)


def _load(path: str):
    from django.utils.module_loading import import_string

    return import_string(path)


def plugins(family: str) -> list:
    """Plugin classes of one family, highest API version first. Raises KeyError for an unknown family."""
    return [_load(path) for path in FAMILIES[family]]


def all_plugins() -> list:
    """Every registered plugin class."""
    return [cls for family in FAMILIES for cls in plugins(family)]


def select(family: str, served: Iterable[str]):
    """The highest-versioned plugin of `family` the cluster can run: the first whose own `available(served)`
    says yes (served: "group/version" strings from discovery).

    Returns None when the cluster serves none of them. Raises KeyError for an unknown family.
    """
    served = set(served)
    for cls in plugins(family):
        if cls.available(served):
            return cls
    return None


def by_name(name: str):
    """The plugin class registered under `name` (e.g. "kai-v2alpha2"). Raises KeyError when none is."""
    for cls in all_plugins():
        if cls.name == name:
            return cls
    raise KeyError(name)


def check_registry() -> None:
    """Import every plugin once at start-up: an unknown or broken entry is an ImproperlyConfigured error."""
    for family, paths in FAMILIES.items():
        for path in paths:
            try:
                cls = _load(path)
            except ImportError as exc:
                raise ImproperlyConfigured(f"backend {family}: cannot import {path}: {exc}") from exc
            if getattr(cls, "family", None) != family:
                raise ImproperlyConfigured(f"backend {path} declares family {cls.family!r}, registered as {family!r}")
