"""What the cluster holds for one job: its gang objects, Indexed Jobs, Services and pods (dicts).

Read per job with one LIST per kind in the job's namespace (`read`: Jobs, Services and pods selected by the job-UID
label; gang kinds listed whole, so an own object whose labels were edited away and a foreign object naming the
job's objects are found too), or sliced out of a cluster-wide resync LIST (`Snapshot.for_job`; selected by label
there, so it holds no unlabelled object: `Observed.foreign_complete` is False, and an own object whose labels were
edited away is found by the create's 409 instead, `JobReconciler.read_ours`). Either way an object is in
here only when it lives in the job's namespace and is gangweb's own by its recorded UID (`reconcile.ownership`):
same-named objects of anybody else are found by the reconciler's create (409) and never adopted, look-alikes
carrying the job's labels and objects claiming the job's objects are reported (`Observed.foreign`), never acted on,
and look-alikes elsewhere in the cluster are never read.

A snapshot's slice is as old as the snapshot: `Observed.listed_at` says when it was listed (None: read for this
pass). The reconciler never concludes from such a slice that something is gone: it reads the job again first
(`JobReconciler.confirm_absence`).
"""
from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from ..backends import registry
from ..backends.base import SchedulerBackend
from ..constants import LABEL_INSTANCE, LABEL_JOB_UID
from ..kube import objects
from ..kube.errors import STORED_VERSION_UNREADABLE, TransientKubeError
from ..kube.objects import JOB, POD, SERVICE
from ..kube.refs import ObjectRef
from . import ownership
from .desired import instance_label
from .observed_set import Observed, kind_key
from .ownership import adopt_names


def _by_name(items: list[dict]) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in items}


# What the reconciler reads of a listed Pod: labels and deletionTimestamp (metadata), `spec.nodeName` (bound),
# `spec.schedulerName`, the spec fields the plugins read back (`registry.pod_spec_keys`: v1alpha2 `schedulingGroup`,
# for releasing the PodGroup finalizer), and the status fields observe/pods.py turns into PodFacts. Everything
# else of a pod (containers, volumes, tolerations, IPs) is dropped: pods are most of what a cluster-wide resync lists.
POD_SPEC_KEYS = ("nodeName", "schedulerName", "schedulingGates", *registry.pod_spec_keys())
POD_STATUS_KEYS = ("phase", "conditions", "containerStatuses", "initContainerStatuses", "startTime", "reason",
                   "message")


def _pick(d: dict | None, keys: tuple[str, ...]) -> dict:
    d = d or {}
    return {k: d[k] for k in keys if k in d}


def slim_pod(pod: dict) -> dict:
    """A Pod reduced to what status derivation and cleanup read: apiVersion, kind, metadata (whole, minus
    managedFields), spec POD_SPEC_KEYS, status POD_STATUS_KEYS."""
    return {"apiVersion": pod.get("apiVersion"), "kind": pod.get("kind"), "metadata": pod.get("metadata") or {},
            "spec": _pick(pod.get("spec"), POD_SPEC_KEYS), "status": _pick(pod.get("status"), POD_STATUS_KEYS)}


def slim_service(svc: dict) -> dict:
    """A Service reduced to apiVersion, kind and metadata: the reconciler only checks it exists, whose it is
    (labels), whether it is terminating, and deletes it by name with a UID precondition."""
    return {"apiVersion": svc.get("apiVersion"), "kind": svc.get("kind"), "metadata": svc.get("metadata") or {}}


def projection(ref: ObjectRef) -> Callable[[dict], dict] | None:
    """The slim projection a snapshot keeps of kind `ref`, or None to keep objects whole.

    Gang objects and Indexed Jobs are kept whole: their spec is compared for drift (`backend.diff`,
    `correct_owner`), their status read, and their body recorded in `GangJob.observed["objects"]`.
    """
    return {POD: slim_pod, SERVICE: slim_service}.get(ref)


def split_labelled(items: list[dict], uid: str) -> tuple[dict[str, dict], list[dict]]:
    """({name: object} carrying job `uid`'s label, [the others]) of a gang kind's objects listed whole."""
    mine, others = {}, []
    for item in items:
        if ownership.carries_label(item, uid):
            mine[item["metadata"]["name"]] = item
        else:
            others.append(item)
    return mine, others


def read(api, backend: SchedulerBackend, namespace: str, uid: str, owner_uids: dict | None = None,
         adopt: frozenset = frozenset()) -> Observed:
    """LIST each kind of the job once in `namespace` (gang kinds whole, Jobs, Services and Pods by the job-UID
    label), and keep what is the job's own (`ownership.trust` with the job's recorded `owner_uids`, None trusting
    any Job there, and `adopt`, the names an unrecorded object may be adopted under: `adopt_names`); what claims
    the job's objects without being its own is in `foreign`."""
    selector = f"{LABEL_JOB_UID}={uid}"
    observed, others = Observed(), {}
    for ref in backend.gang_kinds:
        observed.gang[kind_key(ref)], others[kind_key(ref)] = split_labelled(
            objects.list_objects(api, ref, namespace, ""), uid)
    observed.owners = _by_name(objects.list_objects(api, JOB, namespace, selector))
    observed.services = _by_name(objects.list_objects(api, SERVICE, namespace, selector))
    observed.pods = objects.list_objects(api, POD, namespace, selector)
    return ownership.trust(observed, namespace, owner_uids, uid, adopt, others)


@dataclass
class Snapshot:
    """Every gangweb object of one instance in a cluster, grouped by job UID and namespace (from the resync LISTs):
    `by_uid[job uid][namespace]` is an Observed, so objects are keyed by (namespace, name) and one namespace's
    objects never stand in for another's. `listed_at` is when the first LIST started (time.time())."""

    by_uid: dict[str, dict[str, Observed]] = field(default_factory=lambda: defaultdict(dict))
    listed_at: float = field(default_factory=time.time)
    unreadable: dict = field(default_factory=dict)  # kind_key -> StoredVersionUnreadable error of its LIST
    limit_defaults: dict = field(default_factory=dict)  # namespace -> LimitRange defaults, read once per snapshot
    pod_policies: dict = field(default_factory=dict)  # template version id -> pod policy, read once per snapshot
    # what each LIST cost, in order: {"kind": plural, "seconds", "requests" (pages, restarts included), "objects"}
    reads: list = field(default_factory=list)

    def add(self, items: list[dict], ref: ObjectRef) -> None:
        """File LISTed objects of kind `ref` under their job UID and namespace."""
        for item in items:
            meta = item.get("metadata") or {}
            uid = (meta.get("labels") or {}).get(LABEL_JOB_UID)
            if not uid:
                continue
            observed = self.by_uid[uid].setdefault(meta.get("namespace") or "", Observed())
            name = meta["name"]
            if ref == JOB:
                observed.owners[name] = item
            elif ref == SERVICE:
                observed.services[name] = item
            elif ref == POD:
                observed.pods.append(item)
            else:
                observed.gang_of(ref)[name] = item

    def slice(self, uid: str) -> dict[str, Observed]:
        """Everything labelled with job UID `uid`, by namespace ({namespace: Observed}; ownership not yet judged);
        {} when there is none."""
        return self.by_uid.get(str(uid)) or {}

    def for_job(self, job, backend: SchedulerBackend) -> Observed:
        """The job's own objects (a GangJob: its uid, namespace and recorded `owner_uids`; `ownership.trust`), empty
        when the cluster holds nothing of it, with every gang kind present and `listed_at` set. Objects labelled
        with its UID in other namespaces are left out."""
        found = (self.by_uid.get(str(job.uid)) or {}).get(job.namespace) or Observed()
        observed = ownership.trust(found, job.namespace, job.owner_uids, str(job.uid), adopt_names(job))
        observed.listed_at = self.listed_at
        observed.unreadable = dict(self.unreadable)
        observed.limit_defaults = self.limit_defaults  # shared: the first pass in a namespace reads, the others reuse
        observed.pod_policies = self.pod_policies  # likewise per template version
        for ref in backend.gang_kinds:
            observed.gang_of(ref)
        return observed

    def take(self, job, backend: SchedulerBackend) -> Observed:
        """Like `for_job`, and removes the job from the snapshot (a resync looks at each job once)."""
        observed = self.for_job(job, backend)
        self.by_uid.pop(str(job.uid), None)
        return observed


def snapshot(api, served: set[str], uids=None) -> Snapshot:
    """LIST every kind gangweb creates, once each, across namespaces, by the instance label; with `uids` (job
    UIDs), only those jobs' objects (a set-based selector on the job-UID label), so a batch's reads stay the size
    of the batch rather than of the whole cluster (every pod of every job)."""
    selector = f"{LABEL_INSTANCE}={instance_label()}"
    if uids:
        selector += f",{LABEL_JOB_UID} in ({','.join(sorted(str(u) for u in uids))})"
    snap = Snapshot()
    kinds = registry.gang_kinds(served)
    for ref in [*kinds, JOB, SERVICE, POD]:
        began, sent, items = time.time(), objects.requests.total(), []
        # Projected as each LIST is parsed: only one kind's full parse is ever alive (pods, the largest, last).
        try:
            items = objects.list_objects(api, ref, None, selector, project=projection(ref))
            snap.add(items, ref)
        except TransientKubeError as exc:
            # Objects of a removed API version left in etcd make the kind unlistable cluster-wide: the other kinds'
            # jobs go on; each job of this kind gets the error (JobReconciler.first_read), none is judged absent.
            if ref not in kinds or exc.reason != STORED_VERSION_UNREADABLE:
                raise
            snap.unreadable[kind_key(ref)] = exc
        finally:
            snap.reads.append({"kind": ref.plural, "seconds": time.time() - began,
                               "requests": objects.requests.total() - sent, "objects": len(items)})
    return snap
