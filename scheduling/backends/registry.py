"""The backend registry: a plain mapping from plugin name to plugin class.

Templates name a backend *family* ("kai", "k8s-workload", "coscheduling", "volcano", "kueue"); each family has one
plugin per API version, and `select` picks the highest version the cluster serves (KubeRay-style discovery), as
each plugin's own `available(served)` says. This module is the only place that picks a plugin (`select`,
`plugin_for`, `newest`) or lists a cluster's gang kinds (`gang_kinds`); reconcile/, the watch and the views ask it. The
k8s-workload family has v1beta1 (Kubernetes 1.37) above v1alpha2 (1.36); a cluster upgraded from one to the other
moves its jobs across (reconcile/jobs/reconciler.py `JobReconciler.retire`).
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
    "kueue": ["scheduling.backends.kueue_v1beta2.KueueV1beta2"],
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


def expresses_set_minimums(family: str) -> bool:
    """True when every plugin of `family` holds each pod set to its own minimum (`per_set_minimums`): which plugin
    runs a job depends on its cluster, so the family can only promise what all of them do. Raises KeyError for an
    unknown family."""
    return all(cls.per_set_minimums for cls in plugins(family))


def max_pod_sets(family: str) -> int | None:
    """The most pod sets every plugin of `family` can hold (the lowest `max_pod_sets` among them), or None when none
    limits them (which plugin runs a job depends on its cluster). Raises KeyError for an unknown family."""
    return min((cls.max_pod_sets for cls in plugins(family) if cls.max_pod_sets), default=None)


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


def newest(family: str):
    """The highest-versioned plugin class registered for `family`, whatever a cluster serves (a template's preview
    shows what a job would create on an up-to-date cluster); None for an unknown or empty family."""
    found = plugins(family) if family in FAMILIES else []
    return found[0] if found else None


def plugin_for(name: str = "", family: str = "", served: Iterable[str] = ()):
    """The plugin class a job uses: the one recorded under `name` at dispatch (None when no plugin has that name),
    else the highest version of `family` the cluster serves (`select`; None when it serves none, or the family is
    unknown). The one place that picks a job's plugin: reconcile/, the watch and the job page all ask here."""
    if name:
        try:
            return by_name(name)
        except KeyError:
            return None
    if family not in FAMILIES:
        return None
    return select(family, served)


def api_versions(family: str) -> list[str]:
    """The API versions `family`'s plugins need, highest first ([] for an unknown family), for messages."""
    return [cls.api_version for cls in plugins(family)] if family in FAMILIES else []


def gang_kinds(served: Iterable[str] | None) -> list:
    """The distinct gang ObjectRefs of every plugin the cluster can run (`available(served)`), in registry order;
    with `served` None (a cluster never probed) those of every plugin (a watch skips kinds the server does not
    serve). The one rule for which gang kinds a cluster has: the resync LISTs them, the watcher watches them."""
    served = None if served is None else set(served)
    refs: list = []
    for cls in all_plugins():
        if served is None or cls.available(served):
            refs += [ref for ref in cls.gang_kinds if ref not in refs]
    return refs


def scheduler_names() -> dict[str, str]:
    """{family: its newest plugin's default `scheduler_name`} for the families whose plugins name a scheduler of
    their own (k8s-workload keeps the default scheduler and is absent): the defaults of `Cluster.scheduler_names`."""
    out = {}
    for family in family_names():
        cls = newest(family)
        if cls is not None and cls.scheduler_name:
            out[family] = cls.scheduler_name
    return out


def scheduler_leases(family: str) -> tuple[tuple[str, str], ...]:
    """((namespace or "", name), ...) of the Leases the scheduler of `family`'s newest plugin renews (its
    `scheduler_leases`); () for an unknown family."""
    cls = newest(family)
    return tuple(cls.scheduler_leases) if cls is not None else ()


def api_groups() -> list[str]:
    """The API groups of every registered plugin ("scheduling.k8s.io", "scheduling.run.ai", ...), sorted."""
    return sorted({cls.api_version.rpartition("/")[0] for cls in all_plugins()})


def pod_spec_keys() -> tuple[str, ...]:
    """The pod `spec` fields any registered plugin reads back (`SchedulerBackend.pod_spec_keys`), e.g.
    ("schedulingGroup",): a slim pod listing keeps them."""
    keys: list[str] = []
    for cls in all_plugins():
        keys += [k for k in cls.pod_spec_keys if k not in keys]
    return tuple(keys)


def catalogue(served: Iterable[str]) -> list[dict]:
    """Per registered plugin, family by family: {"family", "name", "api_version", "served", "chosen"}, where
    `served` is the plugin's own `available(served)` and `chosen` marks the one `select` picks (the cluster page)."""
    served = set(served)
    rows = []
    for family in family_names():
        chosen = select(family, served)
        for cls in plugins(family):
            rows.append({"family": family, "name": cls.name, "api_version": cls.api_version,
                         "served": cls.available(served), "chosen": cls is chosen})
    return rows


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
