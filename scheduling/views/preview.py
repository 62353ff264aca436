"""Preview of what a job from a template would create, before any job exists.

Shows the spec a job with no overrides resolves to, what it asks for in queue units, per pod set the pods it
makes, and the objects themselves from the backend plugin's builders (views/objects.example_objects).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from django.core.exceptions import ValidationError

from ..backends.base import gang_minimum
from ..services.templates import specs as template_service
from .display import pods_of_spec, requests_of_spec
from .objects import example_objects


@dataclass
class Preview:
    """What a job from the template creates: `resolved` spec, `asks` in KAI units, `pod_sets` summaries and
    the gang objects (`objects`, dicts) when a backend builder is available. `asks` counts no RuntimeClass
    overhead (a template names no cluster); `runtime_class_names` are the RuntimeClasses whose overhead the cluster
    that runs a job adds (`kube.runtime_classes`)."""

    resolved: dict
    asks: dict
    pods: int
    pod_sets: list = field(default_factory=list)
    objects: list = field(default_factory=list)
    gang_min: int | None = None
    error: str = ""
    runtime_class_names: list = field(default_factory=list)  # their overhead is added in the cluster that runs it


def preview(spec: dict) -> Preview:
    """Preview a validated template spec (no overrides). Never raises for a valid spec."""
    try:
        resolved = template_service.render(spec, {})
    except ValidationError as exc:  # a stored spec is valid; keep the page up if that ever changes
        return Preview(resolved={}, asks={}, pods=0, error="; ".join(exc.messages))
    pod_sets = []
    for ps in resolved["podSets"]:
        containers = ps["template"]["spec"]["containers"]
        pod_sets.append({
            "name": ps["name"], "replicas": ps["replicas"], "minMember": ps.get("minMember"),
            "containers": [{"name": c["name"], "image": c["image"],
                            "requests": c.get("resources", {}).get("requests", {})} for c in containers],
        })
    gang_min = gang_minimum(resolved)  # as the gang objects carry it (backends/base.py)
    classes = sorted({ps["template"]["spec"]["runtimeClassName"] for ps in resolved["podSets"]
                      if isinstance(ps["template"]["spec"].get("runtimeClassName"), str)})
    return Preview(resolved=resolved, asks=requests_of_spec(resolved), pods=pods_of_spec(resolved),
                   pod_sets=pod_sets, gang_min=gang_min, objects=example_objects(resolved),
                   runtime_class_names=classes)
