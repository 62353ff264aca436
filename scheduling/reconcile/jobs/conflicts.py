"""Merge patch with optimistic concurrency: the one conflict-retry loop of a job's pass.

Each patch carries the `resourceVersion` it was planned from, so the API server answers 409 Conflict when the object
changed since it was read (Kubernetes API concepts, "Resource versions" / optimistic concurrency); the object is then
read again and the patch planned again from what is there now, at most MAX_CONFLICT_RETRIES times.
"""
from __future__ import annotations

from collections.abc import Callable

from kubernetes.client.rest import ApiException

from ...kube import objects
from ...kube.errors import TransientKubeError
from ...kube.refs import ObjectRef
from .common import MAX_CONFLICT_RETRIES, Requeue


def merge_patch_retrying(api, ref: ObjectRef, ns: str, name: str, have: dict, plan: Callable[[dict], dict | None],
                         read_again: Callable[[], dict]) -> tuple[dict | None, dict]:
    """Merge-patch object `ref` `ns`/`name` with the body `plan(have)` returns, carrying `have`'s resourceVersion.

    - `plan(obj)`: the merge-patch body for the object as read, or None when nothing is left to patch; it may raise
      to stop the pass (e.g. `Requeue` when the object now differs immutably);
    - `read_again()`: the object as it is now (after a 409), e.g. `JobReconciler.read_ours`.

    Returns (patched, have): `patched` the object as the server returned it after the patch, or None when `plan`
    found nothing to patch; `have` the object as last read. Raises Requeue (1 s, reason "Conflict") when the object
    was deleted meanwhile (404), TransientKubeError "Conflict" when it kept changing, and whatever `merge_patch`
    raises otherwise (a TerminalKubeError 400/422 when the server refuses the patch for good: the caller decides).
    """
    for _ in range(MAX_CONFLICT_RETRIES):
        body = plan(have)
        if body is None:
            return None, have
        try:
            return objects.merge_patch(api, ref, ns, name, body, have["metadata"].get("resourceVersion")), have
        except ApiException as exc:
            if exc.status == 404:
                raise Requeue(1, "Conflict", f"{ref.kind} {ns}/{name} vanished during update") from None
            if exc.status != 409:
                raise
        have = read_again()
    raise TransientKubeError("Conflict", f"{ref.kind} {ns}/{name} kept changing; will retry")
