"""What the cluster holds for one job: its gang objects, Indexed Jobs, Services and pods (dicts).

Read per job with one LIST per kind in the job's namespace, selected by the job-UID label (`read`), or sliced
out of a cluster-wide resync LIST (`Snapshot.for_job`). Either way an object is in here only when its
`gangweb.io/job-uid` label names this job: same-named objects of anybody else are found by the reconciler's
create (409) and never adopted.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from ..backends.base import ObjectRef, SchedulerBackend
from ..constants import LABEL_JOB_UID
from ..kube import objects
from ..kube.objects import JOB, POD, SERVICE


def kind_key(ref: ObjectRef) -> str:
    """"apiVersion/Kind", the key of a kind in Observed.gang."""
    return f"{ref.api_version}/{ref.kind}"


def obj_key(obj: dict) -> str:
    """kind_key of an object dict."""
    return f"{obj.get('apiVersion')}/{obj.get('kind')}"


@dataclass
class Observed:
    """One job's objects in the cluster, as listed. `gang` maps kind_key -> {name: object}."""

    gang: dict[str, dict[str, dict]] = field(default_factory=dict)
    owners: dict[str, dict] = field(default_factory=dict)
    services: dict[str, dict] = field(default_factory=dict)
    pods: list[dict] = field(default_factory=list)

    def gang_of(self, ref: ObjectRef) -> dict[str, dict]:
        """{name: object} of one gang kind."""
        return self.gang.setdefault(kind_key(ref), {})

    def is_empty(self) -> bool:
        """True when nothing of the job is left (pods included)."""
        return not (any(self.gang.values()) or self.owners or self.services or self.pods)


def _by_name(items: list[dict]) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in items}


def read(api, backend: SchedulerBackend, namespace: str, uid: str) -> Observed:
    """LIST each kind of the job once (gang kinds, Jobs, Services, Pods) by its job-UID label."""
    selector = f"{LABEL_JOB_UID}={uid}"
    observed = Observed()
    for ref in backend.gang_kinds:
        observed.gang[kind_key(ref)] = _by_name(objects.list_objects(api, ref, namespace, selector))
    observed.owners = _by_name(objects.list_objects(api, JOB, namespace, selector))
    observed.services = _by_name(objects.list_objects(api, SERVICE, namespace, selector))
    observed.pods = objects.list_objects(api, POD, namespace, selector)
    return observed


@dataclass
class Snapshot:
    """Every gangweb object of one instance in a cluster, grouped by job UID (from the resync LISTs)."""

    by_uid: dict[str, Observed] = field(default_factory=lambda: defaultdict(Observed))

    def add(self, items: list[dict], ref: ObjectRef) -> None:
        """File LISTed objects of kind `ref` under their job UID."""
        for item in items:
            uid = ((item.get("metadata") or {}).get("labels") or {}).get(LABEL_JOB_UID)
            if not uid:
                continue
            observed = self.by_uid[uid]
            name = item["metadata"]["name"]
            if ref == JOB:
                observed.owners[name] = item
            elif ref == SERVICE:
                observed.services[name] = item
            elif ref == POD:
                observed.pods.append(item)
            else:
                observed.gang_of(ref)[name] = item

    def for_job(self, uid: str, backend: SchedulerBackend) -> Observed:
        """The job's Observed (empty when the cluster holds nothing of it), with every gang kind present."""
        observed = self.by_uid.get(uid) or Observed()
        for ref in backend.gang_kinds:
            observed.gang_of(ref)
        return observed
