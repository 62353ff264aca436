"""Which objects are really the job's: only those whose UID gangweb recorded when it created them, in the job's
namespace. Labels are hints for finding, never proof.

Anyone who may create an object in a cluster can put `gangweb.io/job-uid=<uid>` (the UID is shown to every viewer)
and the job's other labels on it, and anyone who may edit gangweb's own object can take those labels off. So the
resync snapshot, the per-job LIST and the watch keep, of what the label selects, only:

- objects in the job's own namespace (`GangJob.namespace`); anything elsewhere is dropped, never read or acted on;
- objects whose `metadata.uid` is the one gangweb recorded for them (`GangJob.owner_uids`, see `record`): owner
  Jobs (batch/v1) under their name, every other kind under `object_key` ("apiVersion/Kind/name"). An object
  under the job's current desired name that carries the job's label but has no UID recorded under its key yet is
  taken as gangweb's own (adopted) and recorded only when it carries gangweb's creation mark (`creation_mark`, an
  HMAC under the install's SECRET_KEY that gangweb puts on every object it creates: `made_by_gangweb`): gangweb
  created it and stopped before recording it. Names are deterministic (reconcile/names.py) and the job's UID is
  shown to every viewer, so anyone may make an object under the name gangweb will use for the job's next
  generation, labels and all; without the mark it is never adopted, counted or deleted (hostile pass F3). Rows
  whose objects were made before gangweb recorded gang objects (Jobs recorded, no gang object: an upgrade) take
  the label alone, once, until the pass records their gang objects. Rows written before UIDs were recorded at all
  (`owner_uids` NULL) trust any Job in the namespace with the label, as before, until they first create a Job;
- pods whose controller reference (`ownerReferences[]` with `controller: true`, kind Job, apiVersion batch/v1)
  names one of those owner Jobs by UID, and which match that Job's `spec.selector.matchLabels` when the Job is at
  hand: the Job controller sets such a reference on every pod it creates and counts only pods that match its
  selector (`pkg/controller/job`, `ControllerRefManager`). A pod's own labels or a non-controller reference are
  ignored for this: anyone may write them. What the Job controller itself reports (its status) caps the counts
  on top of this (observe/pods.py `cross_check`).

Everything else the LISTs find is reported, never touched (`Observed.foreign`, `foreign_entry`): an object carrying
the job's label but not recorded (a look-alike), and an object of a gang kind without the label whose
ownerReferences name one of the job's recorded objects (`claims`: it claims the job's pods or names). An own
object whose labels were edited away is found by its recorded UID and its labels are put back by the pass.

Objects of one kind are keyed by name within the one namespace, so nothing elsewhere can stand in for the job's
own object of the same name. Source of the semantics: Kubernetes "Owners and Dependents" (ownerReferences carry the
owner's UID; the garbage collector and controllers match owners by UID, not name).
"""
from __future__ import annotations

import hashlib
import hmac

from django.conf import settings

from ..constants import ANNOTATION_CREATED, LABEL_JOB_UID
from ..kube.objects import JOB
from ..observe.evidence import JobObjects
from . import names
from .observed_set import Observed

JOB_API_VERSION = JOB.api_version
JOB_KIND = JOB.kind
LOOK_ALIKE = "LookAlike"  # carries the job's labels, but gangweb did not record creating it
CLAIMS_JOB = "ClaimsJobObjects"  # no gangweb label, but its ownerReferences name one of the job's objects
MAX_FOREIGN = 20  # foreign objects reported per job


def _meta(obj: dict) -> dict:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    return meta if isinstance(meta, dict) else {}


def in_namespace(obj: dict, namespace: str) -> bool:
    """True when the object lives in `namespace`."""
    return _meta(obj).get("namespace") == namespace


def object_key(obj: dict) -> str:
    """The key an object's UID is recorded under in `GangJob.owner_uids`: a batch/v1 Job's name (as recorded since
    owner UIDs exist), "apiVersion/Kind/name" for every other kind (a Job name never holds "/")."""
    name = _meta(obj).get("name") or ""
    if obj.get("kind") == JOB_KIND and obj.get("apiVersion") == JOB_API_VERSION:
        return name
    return f"{obj.get('apiVersion')}/{obj.get('kind')}/{name}"


def key_of(api_version: str, kind: str, name: str) -> str:
    """`object_key` of an object not at hand."""
    return object_key({"apiVersion": api_version, "kind": kind, "metadata": {"name": name}})


def split_key(key: str) -> tuple[str, str, str]:
    """(apiVersion, kind, name) of a recorded key (a bare name is a batch/v1 Job)."""
    if "/" not in key:
        return JOB_API_VERSION, JOB_KIND, key
    head, name = key.rsplit("/", 1)
    api_version, kind = head.rsplit("/", 1)
    return api_version, kind, name


def is_recorded(obj: dict, recorded: dict | None) -> bool:
    """True when `obj`'s UID is the one recorded under its key."""
    uid = _meta(obj).get("uid")
    return bool(uid) and (recorded or {}).get(object_key(obj)) == uid


def carries_label(obj: dict, job_uid: str) -> bool:
    """True when `obj` carries the job-UID label of job `job_uid`."""
    labels = _meta(obj).get("labels")
    return isinstance(labels, dict) and labels.get(LABEL_JOB_UID) == job_uid


def creation_mark(job_uid: str, key: str) -> str:
    """gangweb's creation mark of the object under `key` (`object_key`) of job `job_uid`: 32 hex digits of
    HMAC-SHA256 under `settings.SECRET_KEY`. Only a holder of the key can compute it; it differs per job, name and
    kind, so one seen on an object gives nobody the mark of another (the job's next generation)."""
    digest = hmac.new(str(settings.SECRET_KEY).encode(), f"gangweb-created/{job_uid}/{key}".encode(), hashlib.sha256)
    return digest.hexdigest()[:32]


def stamp(want: dict, job_uid: str) -> dict:
    """`want` (an object about to be created) with gangweb's creation mark (ANNOTATION_CREATED) in its
    annotations; a copy, `want` is left as it is."""
    meta = dict(_meta(want))
    meta["annotations"] = {**(meta.get("annotations") or {}), ANNOTATION_CREATED: creation_mark(job_uid,
                                                                                                object_key(want))}
    return {**want, "metadata": meta}


def made_by_gangweb(obj: dict, job_uid: str) -> bool:
    """True when `obj` carries gangweb's creation mark for job `job_uid` under its own key (`creation_mark`)."""
    annotations = _meta(obj).get("annotations")
    mark = annotations.get(ANNOTATION_CREATED) if isinstance(annotations, dict) else None
    return isinstance(mark, str) and hmac.compare_digest(mark, creation_mark(job_uid, object_key(obj)))


def before_gang_records(recorded: dict | None) -> bool:
    """True for a row whose objects were made before gangweb recorded gang objects: nothing recorded at all (None),
    or Jobs recorded and no other kind (its objects carry no creation mark; the label alone adopts them once)."""
    if recorded is None:
        return True
    return bool(recorded) and all("/" not in key for key in recorded)


def may_adopt(obj: dict, job_uid: str | None, recorded: dict | None) -> bool:
    """May `obj`, found under one of the job's current names with no UID recorded under its key, be taken as the
    job's own? Only when it carries the job's label and gangweb's creation mark (`made_by_gangweb`), or the row
    predates gang records (`before_gang_records`) and it carries the label."""
    if job_uid is None or not carries_label(obj, job_uid):
        return False
    return made_by_gangweb(obj, job_uid) or before_gang_records(recorded)


def trusted_object(obj: dict, namespace: str, recorded: dict | None, adopt_names: frozenset | set = frozenset(),
                   job_uid: str | None = None) -> bool:
    """True when the gang object or Service `obj` is the job's own: in `namespace`, and its UID recorded under its
    key; or, with nothing recorded under its key, named one of `adopt_names` (the current generation's desired
    names) and adoptable for job `job_uid` (`may_adopt`: its label and gangweb's creation mark). See the module
    docstring."""
    if not in_namespace(obj, namespace):
        return False
    key = object_key(obj)
    if key in (recorded or {}):
        return is_recorded(obj, recorded)
    return _meta(obj).get("name") in adopt_names and may_adopt(obj, job_uid, recorded)


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


def controller_uid(pod: dict) -> str | None:
    """The UID of the batch/v1 Job named by the pod's controller reference (`controller: true`), or None."""
    for ref in _meta(pod).get("ownerReferences") or []:
        if (isinstance(ref, dict) and ref.get("controller") is True and ref.get("kind") == JOB_KIND
                and ref.get("apiVersion") == JOB_API_VERSION and ref.get("uid")):
            return ref["uid"]
    return None


def owner_job_uids(pod: dict) -> set[str]:
    """UIDs of the batch/v1 Jobs named in a pod's ownerReferences, controller or not (what a pod claims; only
    `controller_uid` counts)."""
    return {ref.get("uid") for ref in _meta(pod).get("ownerReferences") or []
            if isinstance(ref, dict) and ref.get("kind") == JOB_KIND and ref.get("apiVersion") == JOB_API_VERSION
            and ref.get("uid")}


def matches_selector(pod: dict, owner: dict | None) -> bool:
    """True when the pod's labels hold every `spec.selector.matchLabels` pair of its owner Job (the Job
    controller counts only pods its selector matches); True when the owner is not at hand or names none."""
    selector = ((owner or {}).get("spec") or {}).get("selector") or {}
    wanted = selector.get("matchLabels") if isinstance(selector, dict) else None
    if not isinstance(wanted, dict) or not wanted:
        return True
    labels = _meta(pod).get("labels") if isinstance(_meta(pod).get("labels"), dict) else {}
    return all(labels.get(k) == v for k, v in wanted.items())


def trusted_pod(pod: dict, namespace: str, owner_uids: set[str], owners_by_uid: dict | None = None) -> bool:
    """True when the pod is in `namespace`, its controller reference names a trusted owner Job by UID, and it
    matches that Job's selector (`owners_by_uid`: {uid: Job dict} of the Jobs at hand)."""
    uid = controller_uid(pod)
    if not in_namespace(pod, namespace) or uid not in owner_uids:
        return False
    return matches_selector(pod, (owners_by_uid or {}).get(uid))


def accepted_owner_uids(owners, recorded: dict | None) -> set[str]:
    """UIDs whose pods count for the job: the recorded Jobs' (an owner being deleted still owns its pods) and those
    of the trusted `owners` (dicts)."""
    uids = {u for k, u in (recorded or {}).items() if u and "/" not in k}
    uids |= {_meta(o).get("uid") for o in owners if _meta(o).get("uid")}
    return uids


def job_object_uids(recorded: dict | None, *found) -> set[str]:
    """Every UID recorded for the job (Jobs, gang objects, Service) and those of the objects in `found` (iterables
    of dicts): what a foreign object's ownerReferences may name to claim the job's pods or names."""
    uids = {u for u in (recorded or {}).values() if u}
    for objs in found:
        uids |= {_meta(o).get("uid") for o in objs if _meta(o).get("uid")}
    return uids


def foreign_entry(obj: dict, reason: str) -> dict:
    """How a foreign object is reported on the job: {"kind", "apiVersion", "namespace", "name", "uid", "reason",
    "message"} (`observed["foreign"]`, the API answer and the job page)."""
    meta = _meta(obj)
    kind, name = str(obj.get("kind") or "?"), str(meta.get("name") or "")
    where = f"{kind} {meta.get('namespace', '')}/{name}"
    if reason == LOOK_ALIKE:
        message = (f"{where} carries the job's gangweb labels, but gangweb did not create it (its UID "
                   f"{meta.get('uid') or '?'} is not one gangweb recorded, and it has no creation mark of "
                   "gangweb's); gangweb neither adopts, counts, patches nor deletes it")
    else:
        message = (f"{where} is not gangweb's but names the job's objects in its ownerReferences; gangweb "
                   "neither counts, patches nor deletes it")
    return {"kind": kind, "apiVersion": str(obj.get("apiVersion") or ""), "namespace": str(meta.get("namespace") or ""),
            "name": name, "uid": str(meta.get("uid") or ""), "reason": reason, "message": message}


def claims(obj: dict, uids: set[str]) -> bool:
    """True when one of `obj`'s ownerReferences names one of `uids` (the job's objects)."""
    refs = _meta(obj).get("ownerReferences") or []
    return isinstance(refs, list) and any(isinstance(r, dict) and r.get("uid") in uids for r in refs)


def trust(observed: Observed, namespace: str, recorded: dict | None, job_uid: str | None = None,
          adopt_names: frozenset | set = frozenset(), others: dict | None = None) -> Observed:
    """`observed` (as LISTed by label) reduced to the job's own objects (see the module docstring). A new Observed;
    `recorded_phases` and `listed_at` are carried over.

    - `job_uid`: the job's UID (the label's value), `adopt_names`: the current generation's desired gang and
      Service names (taken as the job's when nothing is recorded under their key);
    - `others`: {kind_key: [objects of that gang kind in the namespace without the job's label]} when the caller
      listed them (a per-job read, or a snapshot's per-namespace LIST): an own object among them (its labels
      edited away) is the job's all the same, listed in `relabel`; one whose ownerReferences name the job's objects
      is reported in `foreign`. Without `others`, `foreign` holds the look-alikes found by label only, and
      `foreign_complete` is False.
    """
    out = Observed(recorded_phases=observed.recorded_phases)
    foreign = []
    for key, objs in observed.gang.items():
        mine = {}
        for n, o in objs.items():
            if not in_namespace(o, namespace):
                continue
            if trusted_object(o, namespace, recorded, adopt_names, job_uid):
                mine[n] = o
            else:
                foreign.append(foreign_entry(o, LOOK_ALIKE))
        out.gang[key] = mine
    out.owners = {n: o for n, o in observed.owners.items() if trusted_owner(o, namespace, recorded)}
    out.services = {}
    for n, o in observed.services.items():
        if trusted_object(o, namespace, recorded, adopt_names, job_uid):
            out.services[n] = o
        elif in_namespace(o, namespace):
            foreign.append(foreign_entry(o, LOOK_ALIKE))
    uids = accepted_owner_uids(out.owners.values(), recorded)
    by_uid = {_meta(o).get("uid"): o for o in out.owners.values()}
    out.pods = [p for p in observed.pods if trusted_pod(p, namespace, uids, by_uid)]
    out.listed_at = observed.listed_at
    out.foreign = foreign
    if others is not None:
        annex(out, others, namespace, recorded)
    out.foreign = sorted(out.foreign, key=lambda f: (f["kind"], f["name"]))[:MAX_FOREIGN]
    return out


def annex(out: Observed, others: dict, namespace: str, recorded: dict | None) -> None:
    """Add to `out` (the job's own objects, as `trust` kept them) what the gang kinds listed whole add:
    `others` {kind_key: [objects of that kind in `namespace` without the job's label]}. An own object among them
    (its recorded UID; its labels were edited away) joins `out.gang` and is listed in `out.relabel`; one whose
    ownerReferences name the job's objects is reported in `out.foreign`. Sets `out.foreign_complete`."""
    uids = job_object_uids(recorded, out.owners.values(), *(g.values() for g in out.gang.values()))
    for key, objs in others.items():
        for o in objs:
            if not in_namespace(o, namespace):
                continue
            if is_recorded(o, recorded):
                out.gang.setdefault(key, {})[_meta(o).get("name")] = o
                out.relabel.add(object_key(o))
            elif claims(o, uids):
                out.foreign.append(foreign_entry(o, CLAIMS_JOB))
    out.foreign = sorted(out.foreign, key=lambda f: (f["kind"], f["name"]))[:MAX_FOREIGN]
    out.foreign_complete = True


def adoptable(name: str, uid: str | None, recorded: dict | None, key: str | None = None) -> bool:
    """May an existing object found on create (409) be taken as the job's own? Only when it is the one recorded
    under its key (`key`, else `name`: a Job's key), or no UID is recorded under that key yet (gangweb created it
    and stopped before recording it). Its namespace and job-UID label are checked by the caller when nothing is
    recorded (`JobReconciler.read_ours`)."""
    key = name if key is None else key
    if recorded is None or key not in recorded:
        return True
    return bool(uid) and recorded[key] == uid


def record(job, found: dict[str, dict]) -> dict[str, str]:
    """Note on `job` (in memory) the UIDs of the objects in `found` ({key: object dict}, as created or adopted; a
    Job's key is its name, any other kind's `object_key`), in `job.owner_uids` for the rest of the pass, and return
    those not recorded yet ({key: uid}). A row from before UIDs were recorded (None) starts from every owner it
    trusted. The pass's status write (`status.StatusUpdate.owner_uids`, `status.write`) stores them merged with the
    row's under its lock; only a pass's own new UIDs are written that way, never a stale copy of the row (the
    watch's)."""
    recorded = dict(job.owner_uids or {})
    new = {}
    for key, obj in found.items():
        uid = _meta(obj).get("uid")
        if uid and (recorded.get(key) != uid or job.owner_uids is None):
            recorded[key] = new[key] = uid
    if new:
        job.owner_uids = recorded
    return new


def adopt_names(job) -> frozenset:
    """The names under which an object carrying the job's label but with no UID recorded under its key is taken as
    the job's own (`trusted_object`): its current generation's gang object and Service names."""
    return frozenset({names.gang_name(job.name, job.uid, job.gang_generation),
                      names.service_name(job.name, job.uid, job.gang_generation)})


def select(job_objects: JobObjects, backend, job) -> JobObjects:
    """The job's own objects among `job_objects` (the watch cache's: whatever carries the job's label anywhere in
    the cluster), as a pass keeps them: gang objects of its backend's kinds and the owner Jobs by their recorded
    UID (or, unrecorded, labelled under the current generation's name), pods by their controller reference and the
    Job's selector; everything in the job's namespace. `job`: its row (uid, namespace, owner_uids, name,
    gang_generation), as read under the status write's lock when it can be (`derive.derive`), so a watch
    observation never judges by UIDs older than the pass that recorded them."""
    kinds = {(r.api_version, r.kind) for r in getattr(backend, "gang_kinds", ())}
    ns, recorded, adopt = job.namespace, job.owner_uids, adopt_names(job)
    gang = [g for g in job_objects.gang if (g.get("apiVersion"), g.get("kind")) in kinds
            and trusted_object(g, ns, recorded, adopt, str(job.uid))]
    owners = [w for w in job_objects.owners if trusted_owner(w, ns, recorded)]
    uids = accepted_owner_uids(owners, recorded)
    by_uid = {_meta(w).get("uid"): w for w in owners}
    pods = [p for p in job_objects.pods if trusted_pod(p, ns, uids, by_uid)]
    return JobObjects(gang, owners, pods, unlisted=job_objects.unlisted)
