"""The exact objects gangweb sends to the cluster for a job, for the job page's YAML view.

Source of truth once a job is dispatched: what the reconciler recorded in `job.observed["objects"]` (the
bodies it created or updated). Before that, or for jobs not dispatched yet, nothing is shown: the page says so
rather than guessing.
"""
from __future__ import annotations


def objects_sent(job) -> list[dict]:
    """Kubernetes object bodies (dicts with apiVersion/kind/metadata/spec), in creation order."""
    objs = (job.observed or {}).get("objects") or []
    return [o for o in objs if isinstance(o, dict)]
