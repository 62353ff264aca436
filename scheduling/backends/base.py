"""The scheduler backend plugin interface.

A backend turns a job into its scheduler's gang objects, stamps the pods' template so the scheduler groups
them, and reads the gang objects' status back into a uniform `GangStatus`. It never talks to the cluster
itself: reconcile/ reads and writes; a backend only builds and interprets dicts (so it is unit-testable).

Plugins are registered in `registry.FAMILIES`, one class per scheduler and API version (KubeRay's batch
scheduler package and Kubeflow Trainer's runtime plugins are the models).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from datetime import datetime

from django.utils.dateparse import parse_datetime
from kubernetes.utils import parse_quantity

from ..constants import LABEL_POD_SET
from ..kube.refs import ObjectRef  # lives in kube/ (kube/ takes any ref); plugins may name it from here too


@dataclass
class GangStatus:
    """What the scheduler said about a gang, read from its gang object(s) by a backend.

    - `admitted`: True once the scheduler admitted the gang (e.g. v1alpha2 PodGroupScheduled=True); False when
      it said it cannot (Unschedulable); None when the gang object says nothing either way (derive from pods).
    - `reason` / `message`: the scheduler's own words (e.g. "Unschedulable", "OverLimit").
    - `at`: the cluster's timestamp for that statement (condition lastTransitionTime), or None.
    - `source`: the object it came from, "Kind namespace/name".
    - `queue_details`: KAI QuotaDetails, numbers per resource, when the scheduler gives them.
    - `conditions`: the raw conditions, for display only: observe/ reads the fields below, never these.
    - `reasons`: every {"reason", "message", "details"} the scheduler gives for the gang's wait, most relevant
      first (KAI: the latest scheduling condition's `reasons[]`), for why-pending.
    - `disruption_reason` / `disruption_message`: set while the scheduler says it is disrupting an admitted gang
      (Kubernetes PodGroup `DisruptionTarget=True`, e.g. "PreemptionByScheduler"; Kueue Workload `Evicted=True`,
      e.g. "Preempted"); "" otherwise. `disrupted_at`: when it said so (the condition's lastTransitionTime).
    - `unknown`: a sentence naming a value the scheduler wrote that gangweb does not know (a phase or condition
      type added in a later scheduler release), shown as it is; `reason` is then that value, `admitted` None.
    - `scheduled_at_admission`: True when `at` of an admitted gang is the time it was scheduled, written once by
      the scheduler (v1beta1 `PodGroupInitiallyScheduled`): the Scheduled entry then comes from it, not from the
      pods' bind times. Such a condition never reverts, so a later attempt is still judged from its pods.
    """

    admitted: bool | None = None
    reason: str = ""
    message: str = ""
    at: datetime | None = None
    source: str = ""
    queue_details: dict | None = None
    conditions: list[dict] = field(default_factory=list)
    scheduled_at_admission: bool = False
    reasons: list[dict] = field(default_factory=list)
    disruption_reason: str = ""
    disruption_message: str = ""
    # The cluster's time of that disruption statement (e.g. Kueue Workload `Evicted=True` lastTransitionTime), or
    # None: with it, a gang the scheduler took apart starts a new attempt at that time even when no pod says why
    # (Kueue evicts by suspending the Jobs, whose pods are deleted without a DisruptionTarget condition).
    disrupted_at: datetime | None = None
    # When the scheduler's queue took the gang (Kueue: the Workload's creationTimestamp, the time it entered its
    # LocalQueue), for a scheduler that admits a gang before any pod exists; None otherwise. The Queued entry is then
    # at this time, and an admitted gang's wait is judged from it to `at` (the admission's time).
    queued_at: datetime | None = None
    # A value the scheduler wrote that gangweb does not know (a phase, a condition type), said as it is, e.g.
    # "Volcano reports phase Draining, which gangweb does not know"; "" otherwise. Never mapped to a known reason:
    # `reason` then holds the value itself and `admitted` stays None.
    unknown: str = ""
    # True when `admitted` says a queue manager reserved quota for the whole gang (Kueue's `Admitted`), not that its
    # pods were placed: kube-scheduler places them after, so the Scheduled entry comes from the pods alone
    # (observe/phase_entries.py `_scheduled`).
    quota_only: bool = False


@dataclass(frozen=True)
class PodSetSpec:
    """One pod set of a job as the backends see it.

    `template` is the resolved core/v1 PodTemplateSpec dict (never mutated); `owner_name` the Indexed Job's name;
    `min_member` the pod set's own gang minimum (`set_minimum`: defaults to `replicas`; 0 = an optional set).
    """

    name: str
    replicas: int
    min_member: int
    template: dict
    owner_name: str


def set_minimum(pod_set: dict) -> int:
    """The minimum of one pod set of a resolved spec (`{"name", "replicas", "minMember"?}`): its `minMember` when
    given (0 = an optional set), else its replicas. Pure."""
    stated = pod_set.get("minMember")
    return int(pod_set.get("replicas") or 0) if stated is None else int(stated)


def gang_minimum(resolved_spec: dict) -> int:
    """The gang's minimum of a resolved spec: template/job `gang.minMember` when given, else the sum of its pod
    sets' minimums (`set_minimum`: replicas unless a set states less), so an optional set (minimum 0) never becomes
    required through the gang's count. Pure."""
    stated = ((resolved_spec or {}).get("gang") or {}).get("minMember")
    if stated is not None:
        return int(stated)
    return sum(set_minimum(ps) for ps in (resolved_spec or {}).get("podSets") or [] if isinstance(ps, dict))


@dataclass(frozen=True)
class GangSpec:
    """Everything a backend needs to build a job's gang objects, computed from the job by reconcile/desired.py.

    - `gang_name`: name of the gang object(s), at most 63 characters (see reconcile/names.py);
    - `min_member`: gang minimum over all pod sets (`gang_minimum`: template `gang.minMember`, else the sum of the
      pod sets' minimums);
    - `min_resources`: ResourceList of the gang's minimum, each pod set's minimum pods ({"cpu": "8",
      "nvidia.com/gpu": "2"}; the whole gang unless a set states fewer), see kube/resources.py;
    - `labels`: the labels every object of this job carries (job, job UID, instance, managed-by);
    - `topology`: the template's `topologyConstraint` dict or None; `preemptibility`: "", "preemptible" or
      "non-preemptible"; `schedule_timeout_seconds`: coscheduling's wait, seconds;
    - `disruption_mode`: the template's `gang.disruptionMode`, "" (scheduler default), "single" or "all";
    - `durations`: KAI v0.17 `{"preemptionDelay": "5m", "stalenessGracePeriod": "-1s"}` from the template's gang
      (Go duration strings, validated), only the keys it sets;
    - `scheduler_name`: the pods' `schedulerName` on the job's cluster (`Cluster.scheduler_names`), "" for the
      plugin's default;
    - `priority`: the value of the job's PriorityClass (`scheduling.k8s.io/v1` PriorityClass `value`), read from the
      cluster by the reconciler only for a plugin that sets `needs_priority_value`, when it creates the gang; None
      otherwise.
    """

    job_name: str
    namespace: str
    uid: str
    generation: int
    gang_name: str
    service_name: str
    queue: str
    priority_class_name: str
    preemptibility: str
    topology: dict | None
    min_member: int
    schedule_timeout_seconds: int
    min_resources: dict
    pod_sets: tuple[PodSetSpec, ...]
    labels: dict
    disruption_mode: str = ""
    durations: dict = field(default_factory=dict)
    scheduler_name: str = ""
    priority: int | None = None

    @property
    def total_replicas(self) -> int:
        """Pods of the whole job."""
        return sum(ps.replicas for ps in self.pod_sets)


@dataclass
class Drift:
    """How an observed gang object differs from the desired one.

    - `fields`: the spec fields that differ (empty: in sync);
    - `patch`: a JSON merge patch that fixes them in place (mutable fields only), or None;
    - `replace`: True when a differing field cannot be updated, so the object must be replaced under a new name.
    """

    fields: list[str] = field(default_factory=list)
    patch: dict | None = None
    replace: bool = False

    @property
    def in_sync(self) -> bool:
        """True when nothing differs."""
        return not self.fields


def is_subset(desired, observed, quantities: bool = False) -> bool:
    """True when every value set in `desired` is equal in `observed` (server-side defaults in `observed` are
    ignored). With `quantities`, leaf values compare as Kubernetes quantities ("1000m" == "1" == 1)."""
    if isinstance(desired, dict):
        return isinstance(observed, dict) and all(is_subset(v, observed.get(k), quantities) for k, v in desired.items())
    if isinstance(desired, list):
        return (isinstance(observed, list) and len(desired) == len(observed)
                and all(is_subset(d, o, quantities) for d, o in zip(desired, observed, strict=True)))
    if quantities and desired is not None and observed is not None:
        try:
            return parse_quantity(desired) == parse_quantity(observed)
        except (ValueError, TypeError, ArithmeticError):
            return desired == observed
    return desired == observed


def is_exactly(desired, observed, quantities: bool = False) -> bool:
    """Like `is_subset`, but maps must have the same keys at every level (nothing extra in `observed`)."""
    if isinstance(desired, dict):
        return (isinstance(observed, dict) and set(desired) == set(observed)
                and all(is_exactly(v, observed[k], quantities) for k, v in desired.items()))
    if isinstance(desired, list):
        return (isinstance(observed, list) and len(desired) == len(observed)
                and all(is_exactly(d, o, quantities) for d, o in zip(desired, observed, strict=True)))
    return is_subset(desired, observed, quantities)


def replacing(desired, observed):
    """The JSON merge patch value (RFC 7386) that turns `observed` into exactly `desired`: a merge patch merges
    maps, so keys only `observed` has are named with null, at every level; lists and leaves are replaced whole."""
    if isinstance(desired, dict) and isinstance(observed, dict):
        return {**{k: None for k in observed if k not in desired},
                **{k: replacing(v, observed.get(k)) for k, v in desired.items()}}
    return desired


def _get_path(value, path: list[str]):
    """(True, value at `path` through nested maps) or (False, None) when a map along the way lacks a key."""
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return False, None
        value = value[key]
    return True, value


def _patch_within(want, have, leaves: list[list[str]]):
    """(merge patch, differing leaves) that turns `have` into `want` by changing only values at `leaves` (paths
    through nested maps), or None when anything else differs (or a leaf's maps are missing on either side)."""
    if not (isinstance(want, dict) and isinstance(have, dict)):
        return None
    aligned, patch, differing = copy.deepcopy(want), {}, []
    for leaf in leaves:
        found_want, wanted = _get_path(want, leaf)
        found_have, had = _get_path(have, leaf)
        if not found_want or not found_have:
            return None
        if is_subset(wanted, had):
            continue
        target, out = aligned, patch
        for key in leaf[:-1]:
            target, out = target[key], out.setdefault(key, {})
        target[leaf[-1]], out[leaf[-1]] = copy.deepcopy(had), wanted
        differing.append(leaf)
    if not differing or not is_subset(aligned, have):
        return None
    return patch, differing


def parse_time(value) -> datetime | None:
    """An RFC 3339 timestamp from the API ("2026-11-29T14:00:00Z") as an aware datetime, or None: also for a
    malformed one or one naming no such day (objects in a cluster are written by others)."""
    try:
        return parse_datetime(value) if isinstance(value, str) and value else None
    except ValueError:
        return None


def object_source(obj: dict) -> str:
    """"Kind namespace/name" of an object dict, for GangStatus.source and messages."""
    meta = obj.get("metadata", {})
    return f"{obj.get('kind', '?')} {meta.get('namespace', '')}/{meta.get('name', '')}"


class SchedulerBackend:
    """Base class of a backend plugin. Subclasses set the class attributes and implement the hooks.

    Class attributes:
    - `family`: the name templates use ("kai", "k8s-workload", "coscheduling", "volcano");
    - `name`: unique plugin name, family plus version, e.g. "k8s-workload-v1alpha2";
    - `api_version`: the group/version it needs, checked through API discovery;
    - `scheduler_name`: the pods' `spec.schedulerName` ("" keeps the default scheduler);
    - `scheduler_leases`: ((namespace, or "" for any, name), ...) of the Leases its scheduler's leader renews, at the
      scheduler's upstream defaults (kube/scheduler_presence.py: is the scheduler there);
    - `gang_refs`: names of the class attributes holding the ObjectRefs of the gang objects it creates, in creation
      order (e.g. ("WORKLOAD", "POD_GROUP")); the refs are class attributes so that a later API version subclasses
      a plugin and overrides only the refs that changed;
    - `gang_kinds`: those ObjectRefs, computed for each subclass from `gang_refs` (`__init_subclass__`);
    - `immutable_spec`: True when the gang objects' spec cannot be updated (replace under a new name instead);
    - `root_ref` (property): the kind of the job's root object, the gang object that lives longest, created first;
      every other object of the job (other gang objects, the Indexed Jobs, the Service) names it in
      `metadata.ownerReferences`, so the cluster's garbage collector removes them with it (reconcile/owner_refs.py).
      By default the first of `gang_kinds`; a plugin whose first kind is not the longest-lived overrides it.
    """

    family: str = ""
    name: str = ""
    api_version: str = ""
    scheduler_name: str = ""
    scheduler_leases: tuple[tuple[str, str], ...] = ()
    gang_refs: tuple[str, ...] = ()
    gang_kinds: tuple[ObjectRef, ...] = ()
    immutable_spec: bool = False

    # Spec fields a merge patch may change in place; any other differing field means replace. An entry may be a
    # dotted path into a map-valued field ("schedulingPolicy.gang.minCount"): only that leaf is then mutable, and a
    # difference anywhere else in the field replaces. `mutable_by_kind` overrides it per gang kind ({"PodGroup": ...}).
    mutable_fields: tuple[str, ...] = ()
    mutable_by_kind: dict[str, tuple[str, ...]] = {}
    # Spec fields whose values are ResourceLists (compared as quantities).
    quantity_fields: tuple[str, ...] = ("minResources",)
    # Spec fields gangweb owns whole (maps and lists of maps it writes completely): a key or item field present only
    # in the cluster object is drift, not a server default, and the patch removes it (a merge patch would merge).
    owned_whole: tuple[str, ...] = ()
    # Finalizers gangweb may release on its own objects once no live pod needs them.
    releasable_finalizers: tuple[str, ...] = ()
    # Pod `spec` fields the plugin reads back from the cluster (`pod_in_group`); kept when pods are listed slim.
    pod_spec_keys: tuple[str, ...] = ()
    # The highest priority value the API server accepts on the gang object whose priorityClassName the plugin sets
    # (None: no limit, or the plugin sets none); services/templates.check_gang_priority_class refuses a class above.
    max_gang_priority: int | None = None
    # Whether the gang objects hold each pod set to its own minimum (`PodSetSpec.min_member`, 0 = an optional set)
    # besides the gang's: KAI subGroups[].minMember, Volcano minTaskMember. A plugin without it has one group with
    # one count, so a pod set's minimum below its replicas is refused at template write and at submit
    # (services/templates.check_set_minimums); `set_minimums` reads what the built objects say, for the contract.
    per_set_minimums: bool = False
    # Why a plugin without `per_set_minimums` cannot express one, for the refusal's words.
    set_minimum_refusal: str = "its gang is one group with one count"
    # A queue manager that admits the gang before any pod may exist (Kueue): the Indexed Jobs are created suspended
    # (`spec.suspend: true`, no pods) and the reconciler un-suspends them only while `pods_allowed` says so, and
    # suspends them again when it stops saying so (an eviction).
    holds_pods_until_admitted: bool = False
    # Deleting the gang objects releases what the scheduler holds for the job (Kueue's quota): they are deleted only
    # once no pod of the job is left (a cancel, a clean-up, an earlier generation), never beside running pods.
    gang_deleted_after_pods: bool = False
    # The gang object needs the job's PriorityClass value itself (Kueue's Workload `spec.priority`, required beside
    # `priorityClassRef`): the reconciler reads it from the cluster into `GangSpec.priority` before creating it.
    needs_priority_value: bool = False
    # The most pod sets the gang object can hold (Kueue's Workload: `podSets` MaxItems=8), or None: a template with
    # more is refused at write (services/templates/specs.py).
    max_pod_sets: int | None = None
    # Names of the gang refs whose `status` subresource gangweb writes (`status_writes`), for the RBAC rules.
    status_refs: tuple[str, ...] = ()

    def __init_subclass__(cls, **kwargs):
        """Compute `gang_kinds` from `gang_refs` (the subclass's own refs, inherited or overridden), unless the
        subclass sets `gang_kinds` itself."""
        super().__init_subclass__(**kwargs)
        if cls.gang_refs and "gang_kinds" not in cls.__dict__:
            cls.gang_kinds = tuple(getattr(cls, attr) for attr in cls.gang_refs)

    @property
    def root_ref(self) -> ObjectRef:
        """The ObjectRef of the job's root object (class docstring): the first gang kind, created first."""
        return self.gang_kinds[0]

    @classmethod
    def available(cls, served: set[str]) -> bool:
        """True when the cluster serves `api_version` (served: {"group/version", ...} from discovery)."""
        return cls.api_version in served

    # ---- hooks ------------------------------------------------------------------------------------------------
    def build_gang_objects(self, spec: GangSpec) -> list[dict]:
        """The desired gang objects (full dicts with apiVersion, kind, metadata, spec), in creation order."""
        raise NotImplementedError

    def stamp_pod_template(self, template: dict, spec: GangSpec, pod_set: PodSetSpec) -> dict:
        """A copy of the pod template with what the scheduler needs to group the pod (schedulerName, labels,
        annotations, `spec.schedulingGroup`). The base sets `schedulerName` when the backend names a scheduler:
        the cluster's name for it (`spec.scheduler_name`), else the plugin's default."""
        out = copy.deepcopy(template)
        if self.scheduler_name:
            out.setdefault("spec", {})["schedulerName"] = spec.scheduler_name or self.scheduler_name
        return out

    def job_pod_template(self, spec: GangSpec, pod_set: PodSetSpec) -> dict:
        """The pod template of one pod set as its Indexed Job carries it (reconcile/desired.py `owners`): a copy of
        the pod set's template with the job's labels and `gangweb.io/pod-set`, the rendezvous subdomain (the
        Service), restartPolicy Never unless the template says OnFailure, the job's priorityClassName, then this
        plugin's stamp (`stamp_pod_template`). Pure; the pod set's template is not mutated."""
        template = copy.deepcopy(pod_set.template)
        meta = template.setdefault("metadata", {})
        meta["labels"] = {**(meta.get("labels") or {}), **spec.labels, LABEL_POD_SET: pod_set.name}
        pod = template.setdefault("spec", {})
        pod["subdomain"] = spec.service_name
        if pod.get("restartPolicy") not in ("Never", "OnFailure"):
            pod["restartPolicy"] = "Never"
        if spec.priority_class_name:
            pod["priorityClassName"] = spec.priority_class_name
        return self.stamp_pod_template(template, spec, pod_set)

    def owner_metadata(self, spec: GangSpec) -> dict:
        """Extra {"labels": {...}, "annotations": {...}} for the pods' owners (the Indexed Jobs)."""
        return {"labels": {}, "annotations": {}}

    def pod_in_group(self, pod: dict, gang_name: str) -> bool:
        """True when the observed `pod` (one of the job's) belongs to the gang object named `gang_name`, as the
        scheduler links them. The base says every pod of the job does (one gang per job, named by labels)."""
        return True

    def read_status(self, objects: list[dict]) -> GangStatus:
        """Read the observed gang objects of one job into a GangStatus (empty list: GangStatus())."""
        raise NotImplementedError

    def set_minimums(self, objects: list[dict]) -> dict[str, int] | None:
        """{pod set name: minimum} as the gang objects `objects` (as built) express them, or None when this plugin
        cannot express a per-set minimum (`per_set_minimums` False: the base)."""
        return None

    def pods_allowed(self, objects: list[dict]) -> bool:
        """True when the job's Indexed Jobs may have pods now, given its observed gang objects of the current
        generation (`objects`). The base: always (its scheduler gates the pods themselves); a plugin that
        `holds_pods_until_admitted` says True only while its queue manager admits the gang."""
        return True

    def status_writes(self, objects: list[dict], *, pods_gone: bool, ended: tuple[str, str] | None,
                      now: datetime) -> list[tuple[ObjectRef, dict, dict]]:
        """The status writes gangweb owes the scheduler about the job's gang objects (`objects`, the current
        generation as observed), as [(ref, the object as read, merge patch of its `status` subresource)]; [] when
        none. `pods_gone`: no pod of the job is left (terminating ones count as left); `ended`: (reason, message)
        once the job Succeeded or Failed ("Succeeded"/"Failed"), else None; `now`: the time to stamp conditions
        with. The base writes nothing (the scheduler owns its status)."""
        return []

    def wants_pass(self, objects: list[dict], owners: list[dict], pods: list[dict]) -> bool:
        """True when what the watch sees of a job (its gang objects, owner Jobs and pods, as cached) asks the
        reconciler to act although nothing was deleted or edited: the base never; a plugin that
        `holds_pods_until_admitted` when a Job's `suspend` disagrees with `pods_allowed`, or a status write is due."""
        return False

    def mutable_paths(self, kind: str) -> tuple[str, ...]:
        """The spec paths of gang kind `kind` a merge patch may change: `mutable_by_kind[kind]`, else
        `mutable_fields`. A path is a top-level field ("minMember") or a dotted path into a map ("a.b.c")."""
        return self.mutable_by_kind.get(kind, self.mutable_fields)

    def diff(self, desired: dict, observed: dict) -> Drift:
        """Compare one desired gang object with the observed one of the same kind and name.

        Compares the spec fields the desired object sets plus the kind's top-level mutable fields (so a field
        gangweb stopped setting, e.g. a cleared priorityClassName, is removed). Values set only by the server are
        ignored. A differing field that is mutable whole is patched in place; one with mutable paths inside
        (`mutable_paths`, "schedulingPolicy.gang.minCount") is patched at those leaves when they are all that
        differs, and `fields` names the paths; anything else, or any drift with `immutable_spec`, is a replace.
        """
        want, have = desired.get("spec") or {}, observed.get("spec") or {}
        paths = self.mutable_paths(desired.get("kind", ""))
        whole = tuple(p for p in paths if "." not in p)
        inner: dict[str, list[list[str]]] = {}
        for path in paths:
            if "." in path:
                head, *rest = path.split(".")
                inner.setdefault(head, []).append(rest)
        changed = []
        for key in sorted({*want, *whole}):
            if key not in want:
                if have.get(key) not in (None, "", {}, []):
                    changed.append(key)
            elif not is_subset(want[key], have.get(key), quantities=key in self.quantity_fields):
                changed.append(key)
            elif key in self.quantity_fields and set(want[key] or {}) != set(have.get(key) or {}):
                changed.append(key)
            elif key in self.owned_whole and not is_exactly(want[key], have.get(key), key in self.quantity_fields):
                changed.append(key)
        if not changed:
            return Drift()
        if self.immutable_spec or any(key not in whole and key not in inner for key in changed):
            return Drift(fields=changed, replace=True)
        patch, fields = {}, []
        for key in changed:
            if key in whole:
                patch[key] = replacing(want.get(key), have.get(key))
                fields.append(key)
                continue
            within = _patch_within(want.get(key), have.get(key), inner[key])
            if within is None:
                return Drift(fields=changed, replace=True)
            patch[key], leaves = within
            fields += [".".join([key, *leaf]) for leaf in leaves]
        return Drift(fields=fields, patch={"spec": patch})

    # ---- helpers for subclasses ---------------------------------------------------------------------------------
    def metadata(self, spec: GangSpec, name: str, annotations: dict | None = None) -> dict:
        """metadata of a gang object: name, namespace and the job's labels."""
        meta = {"name": name, "namespace": spec.namespace, "labels": dict(spec.labels)}
        if annotations:
            meta["annotations"] = dict(annotations)
        return meta

    def new_gang_object(self, ref: ObjectRef, spec: GangSpec, body: dict) -> dict:
        """A gang object of kind `ref` named `spec.gang_name`: apiVersion, kind, `metadata()` and `body` as spec."""
        return {"apiVersion": ref.api_version, "kind": ref.kind, "metadata": self.metadata(spec, spec.gang_name),
                "spec": body}

    def gang_object(self, ref: ObjectRef, objects: list[dict]) -> dict | None:
        """The job's current object of kind `ref` among `objects` (by apiVersion and kind), or None: a live one
        before a terminating one, and among those the newest (creationTimestamp). After a replacement the list
        can hold the old generation's object, terminating while its finalizer holds it; its status is history."""
        mine = [o for o in objects if o.get("kind") == ref.kind and o.get("apiVersion") == ref.api_version]
        if not mine:
            return None

        def rank(obj: dict):
            meta = obj.get("metadata") or {}
            return (not meta.get("deletionTimestamp"), meta.get("creationTimestamp") or "")

        return max(mine, key=rank)
