"""The exact objects gangweb sends to a cluster for a job (the job page's YAML), and for an example job of a
template (the template preview).

Both come from the reconciler's own pure builders (`reconcile.desired`: gang spec, Indexed Job owners, rendezvous
Service; the backend plugin's `build_gang_objects` and pod-template stamp), so the page shows what reconcile
creates, not a re-implementation. Where the builders or the plugin are not available the job page falls back to
the object bodies the observer recorded in `job.observed["objects"]`.
"""
from __future__ import annotations

import uuid

from ..backends import registry

EXAMPLE_UID = uuid.UUID("00000000-0000-4000-8000-000000000000")  # stable names in the preview


def build_objects(job, plugin_cls) -> list[dict]:
    """Gang objects, then one Indexed Job per pod set, then the headless Service, as reconcile creates them (the
    Jobs of a backend that holds pods until its queue manager admits the gang, Kueue, as created: suspended)."""
    from ..reconcile import desired

    backend = plugin_cls()
    spec = desired.gang_spec(job)
    owners = desired.owners(backend, spec, suspend=backend.holds_pods_until_admitted)
    return [*backend.build_gang_objects(spec), *owners, desired.service(spec)]


def objects_sent(job) -> list[dict]:
    """Kubernetes object bodies (dicts with apiVersion/kind/metadata/spec) of `job`, in creation order; []
    before a backend was chosen and nothing was observed."""
    plugin_cls = registry.plugin_for(job.backend_plugin) if job.backend_plugin else None
    if plugin_cls is not None:
        built = build_objects(job, plugin_cls)
        if built:
            return built
    return [o for o in (job.observed or {}).get("objects") or [] if isinstance(o, dict)]


def example_objects(resolved_spec: dict, queue_name: str = "example-queue") -> list[dict]:
    """The objects a job named "example" in namespace "default" with this resolved spec would create, with the
    highest-versioned plugin of its backend family; [] when none is registered."""
    from ..models import GangJob, QueuePolicy

    plugin_cls = registry.newest(resolved_spec.get("backend", ""))
    if plugin_cls is None:
        return []
    job = GangJob(name="example", namespace="default", uid=EXAMPLE_UID, resolved_spec=resolved_spec,
                  queue=QueuePolicy(name=queue_name), priority_class_name=resolved_spec.get("priorityClassName", ""))
    return build_objects(job, plugin_cls)
