"""Which of the objects labelled with a job's UID are really the job's: read only where gangweb put them.

Labels are not proof: anyone who may create a Pod or a Job anywhere in a cluster can put `gangweb.io/job-uid=<uid>`
(the UID is shown to every viewer) on it. So the resync snapshot, the per-job LIST and the watch keep, of what the
label selects, only:

- objects in the job's own namespace (`GangJob.namespace`); anything elsewhere is dropped, never read or acted on;
- owner Jobs (batch/v1) whose `metadata.uid` is the one gangweb recorded for that name when it created it
  (`GangJob.owner_uids`, {name: uid}; see `record`). Rows written before UIDs were recorded (`owner_uids` NULL)
  trust any Job in the namespace with the label, as before, until they first create a Job;
- pods whose `ownerReferences` name one of those owner Jobs by UID (the Job controller sets a controller reference
  on every pod it creates: kind Job, apiVersion batch/v1, the Job's uid). A pod's labels are ignored for this.

Objects of one kind are keyed by name within the one namespace, so nothing elsewhere can stand in for the job's
own object of the same name. Source of the semantics: Kubernetes "Owners and Dependents" (ownerReferences carry the
owner's UID; the garbage collector and controllers match owners by UID, not name).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..kube.objects import JOB

if TYPE_CHECKING:  # observed.py imports this module
    from .observed import Observed

JOB_API_VERSION = JOB.api_version
JOB_KIND = JOB.kind


def _meta(obj: dict) -> dict:
    return obj.get("metadata") or {}


def in_namespace(obj: dict, namespace: str) -> bool:
    """True when the object lives in `namespace`."""
    return _meta(obj).get("namespace") == namespace


def trusted_owner(obj: dict, namespace: str, recorded: dict | None) -> bool:
    """True when the Job `obj` is one gangweb created for the job: in `namespace`, and its UID is the one recorded
    under its name (`recorded` None: a row from before UIDs were recorded, trusted by namespace alone)."""
    if not in_namespace(obj, namespace):
        return False
    if recorded is None:
        return True
    meta = _meta(obj)
    uid = meta.get("uid")
    return bool(uid) and recorded.get(meta.get("name")) == uid


def owner_job_uids(pod: dict) -> set[str]:
    """UIDs of the batch/v1 Jobs named in a pod's ownerReferences."""
    return {ref.get("uid") for ref in _meta(pod).get("ownerReferences") or []
            if ref.get("kind") == JOB_KIND and ref.get("apiVersion") == JOB_API_VERSION and ref.get("uid")}


def trusted_pod(pod: dict, namespace: str, owner_uids: set[str]) -> bool:
    """True when the pod is in `namespace` and one of its ownerReferences names a trusted owner Job by UID."""
    return in_namespace(pod, namespace) and bool(owner_job_uids(pod) & owner_uids)


def accepted_owner_uids(owners, recorded: dict | None) -> set[str]:
    """UIDs whose pods count for the job: the recorded ones (an owner being deleted still owns its pods) and those of
    the trusted `owners` (dicts)."""
    uids = {u for u in (recorded or {}).values() if u}
    uids |= {_meta(o).get("uid") for o in owners if _meta(o).get("uid")}
    return uids


def trust(observed: Observed, namespace: str, recorded: dict | None) -> Observed:
    """`observed` (as LISTed by label) reduced to the job's own objects (see the module docstring). A new Observed;
    `recorded_phases` and `listed_at` are carried over."""
    from .observed import Observed

    out = Observed(recorded_phases=observed.recorded_phases)
    for key, objs in observed.gang.items():
        out.gang[key] = {n: o for n, o in objs.items() if in_namespace(o, namespace)}
    out.owners = {n: o for n, o in observed.owners.items() if trusted_owner(o, namespace, recorded)}
    out.services = {n: o for n, o in observed.services.items() if in_namespace(o, namespace)}
    uids = accepted_owner_uids(out.owners.values(), recorded)
    out.pods = [p for p in observed.pods if trusted_pod(p, namespace, uids)]
    out.listed_at = observed.listed_at
    return out


def adoptable(name: str, uid: str | None, recorded: dict | None) -> bool:
    """May an existing Job `name` (UID `uid`) found on create (409) be taken as the job's own? Only when it is the
    one recorded under that name, or no UID is recorded for that name yet (gangweb created it and stopped before
    recording it). Its namespace and job-UID label are checked by the caller (`JobReconciler.read_ours`)."""
    if recorded is None or name not in recorded:
        return True
    return bool(uid) and recorded[name] == uid


def record(job, owners: dict[str, dict]) -> dict[str, str]:
    """Note on `job` (in memory) the UIDs of the owner Jobs in `owners` ({name: Job dict}, as created or adopted),
    in `job.owner_uids` for the rest of the pass, and return those not recorded yet ({name: uid}). A row from
    before UIDs were recorded (None) starts from every owner it trusted. The pass's status write
    (`status.StatusUpdate.owner_uids`, `status.write`) stores them merged with the row's under its lock; only a
    pass's own new UIDs are written that way, never a stale copy of the row (the watch's)."""
    recorded = dict(job.owner_uids or {})
    new = {}
    for name, obj in owners.items():
        uid = _meta(obj).get("uid")
        if uid and (recorded.get(name) != uid or job.owner_uids is None):
            recorded[name] = new[name] = uid
    if new:
        job.owner_uids = recorded
    return new
