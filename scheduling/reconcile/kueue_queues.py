"""Keep Kueue's queue objects (`kueue.x-k8s.io/v1beta2`) in line with gangweb's queue policies.

The same engine as the KAI and Volcano Queue syncs (reconcile/queue_sync.py; `KueueQueues` is the family adapter),
in every cluster that serves `kueue.x-k8s.io/v1beta2` (the API the Kueue backend plugin needs; a cluster never
probed is tried, and a 404 on the LIST means it does not serve Kueue). The mapping is reconcile/kueue_desired.py:
a parent policy is a Cohort, a leaf a ClusterQueue, both named after the policy. One pass:

1. `_begin`: the pass's queue tree, for each leaf's allowed namespaces (its own and every ancestor's);
2. `_ensure_flavor`: the ResourceFlavor `gangweb-default` created when a policy needs it, put back when edited by
   hand, never adopted when a same-named one is not gangweb's;
3. the engine's `apply_desired` over the Cohorts and ClusterQueues (LISTed together): created parents first, put
   back and recorded as drift when edited by hand (spec hash), never adopted; a leaf that became a parent has its
   ClusterQueue deleted and its Cohort created once it is gone;
4. `_local_queues`: a LocalQueue named after each leaf in each namespace it allows (only beside a ClusterQueue that
   is gangweb's; `spec.clusterQueue` is immutable, so it cannot drift); gangweb's LocalQueues of a namespace that
   left the policy deleted, unless workloads still hold quota through them; a same-named one never adopted;
5. the engine's `delete_stale`: gangweb's Cohorts and ClusterQueues no policy wants, children first, with a UID
   precondition; a ClusterQueue whose status counts admitted or quota-reserving workloads is kept and reported
   (its jobs keep running), a Cohort with member queues too;
6. `_drop_flavor`: the ResourceFlavor deleted once no policy and no ClusterQueue in the cluster uses it;
7. the engine's `import_foreign`, `read_status` (kueue_desired.status_payload, plus the LocalQueues' counts) and
   `save`: QueueClusterState rows of family kueue, with warnings.
"""
from __future__ import annotations

import logging

from kubernetes import client
from kubernetes.client.rest import ApiException

from ..choices import QueueFamily, SyncState
from ..kube.client import REQUEST_TIMEOUT
from ..kube.errors import TransientKubeError, classify, describe
from ..models import Cluster, QueueClusterState
from . import kueue_desired as kd
from . import queue_desired as qd
from . import queue_sync

log = logging.getLogger(__name__)
G, V = kd.GROUP, kd.VERSION
REASON = "KueueQueueSync"
LQ, RF = kd.PLURALS[kd.LOCAL_QUEUE], kd.PLURALS[kd.FLAVOR_KIND]


def serves_kueue(cluster: Cluster) -> bool | None:
    """True when the cluster's last probe found `kueue.x-k8s.io/v1beta2` served (what the Kueue backend plugin
    needs too), False when it did not, None when the cluster was never probed (then the LIST decides)."""
    served = set(cluster.served_apis or [])
    if not served:
        return None
    return kd.API_VERSION in served


def _kind(obj: dict) -> str:
    return obj.get("kind") or kd.CLUSTER_QUEUE


def _owned_first(obj: dict) -> tuple:
    """Sort key: of two same-named objects (a Cohort and a ClusterQueue), gangweb's live one is the one acted on."""
    return (qd.is_ours(obj), not obj["metadata"].get("deletionTimestamp"))


def _sort_error(ctx: queue_sync.SyncContext, what: str, exc: BaseException) -> str:
    """Put a failed write on the pass (transient or terminal) and return its short words."""
    if isinstance(exc, ApiException):
        said = f"{what}: {exc.status} {exc.reason}"
        transient = exc.status == 409 or isinstance(classify(exc), TransientKubeError)
    else:
        said, transient = f"{what}: {describe(exc)}", True
    (ctx.result.transient if transient else ctx.result.errors).append(said)
    return said


class KueueQueues(queue_sync.Family):
    """The Kueue family for the queue-sync engine: Cohorts and ClusterQueues for the policies, the ResourceFlavor
    and LocalQueues beside them; state in QueueClusterState rows of family kueue (with warnings). One instance
    serves one pass (it keeps each policy's desired kind and namespaces, and the LocalQueues it listed)."""

    group, version, plural = G, V, kd.PLURALS[kd.CLUSTER_QUEUE]
    reason = REASON
    noun = "Kueue Cohort or ClusterQueue"
    write_label = " (Kueue)"
    detail_statuses = (400, 403, 422)  # the CRD schema's (CEL) or a webhook's words are worth showing
    pending_message = "the Kueue object is being deleted; created again once gone"
    action_prefix = "kueue: "
    absent_on_404 = True
    queue_family = QueueFamily.KUEUE
    state_fields = ("state", "message", "warnings", "last_synced_at", "resource_version", "last_drift",
                    "last_drift_at", "status", "status_at")

    def __init__(self):
        self.tree = None
        self.kinds: dict[str, str] = {}  # policy name -> the kind its object must be (set by `desired`)
        self.namespaces: dict[str, list[str]] = {}  # leaf policy name -> namespaces it allows
        self.flavor: dict | None = None  # the ResourceFlavor as found or written this pass
        self.local_queues: dict[tuple[str, str], dict] = {}  # (namespace, name) -> gangweb's LocalQueues

    # --- the engine's hooks --------------------------------------------------------------------------------------

    def list_failed_message(self, exc):
        return f"Kueue Cohorts/ClusterQueues: {describe(exc, 1900)}"

    def list_objects(self, api):
        found: dict[str, dict] = {}
        for kind in (kd.COHORT, kd.CLUSTER_QUEUE):
            listing = api.list_cluster_custom_object(G, V, kd.PLURALS[kind], _request_timeout=REQUEST_TIMEOUT)
            for obj in listing.get("items", []):
                obj["kind"] = kind
                name = obj["metadata"]["name"]
                if name not in found or _owned_first(obj) > _owned_first(found[name]):
                    found[name] = obj
        return list(found.values())

    def plural_of(self, obj):
        return kd.PLURALS.get(_kind(obj), self.plural)

    def kind_name(self, obj):
        return _kind(obj)

    def parent_of(self, obj):
        spec = obj.get("spec") or {}
        return str((spec.get("parentName") if _kind(obj) == kd.COHORT else spec.get("cohortName")) or "")

    def replaced_kind(self, name, obj):
        return name in self.kinds and self.kinds[name] != _kind(obj)

    def keep_reason(self, obj):
        if _kind(obj) != kd.CLUSTER_QUEUE:
            return ""
        held = kd.workloads_held(obj)
        return f"{held} in its ClusterQueue" if held else ""

    def desired(self, policy, parent_name, children):
        namespaces = kd.allowed_namespaces(policy, self.tree.ancestors(policy) if self.tree else [])
        want = kd.desired(policy, parent_name, children, namespaces)
        self.kinds[policy.name] = want.kind
        if want.kind == kd.CLUSTER_QUEUE:
            self.namespaces[policy.name] = namespaces
        return want.spec, want.warnings

    def flat(self, spec):
        return kd.flat_fields(spec)

    def diff(self, want, found):
        return kd.diff(want, found)

    def body(self, name, spec, existing):
        return kd.body(self.kinds.get(name) or _kind(existing or {}), name, spec, existing)

    def import_fields(self, spec):
        return kd.import_fields(spec)

    def status(self, obj):
        out = kd.status_payload(obj)
        if out["kind"] == kd.CLUSTER_QUEUE:
            name = obj["metadata"]["name"]
            out["local_queues"] = [
                {"namespace": ns, **{k: v for k, v in kd.status_payload({**lq, "kind": kd.CLUSTER_QUEUE}).items()
                                     if k in ("pending_workloads", "reserving_workloads", "admitted_workloads")}}
                for (ns, n), lq in sorted(self.local_queues.items()) if n == name]
        return out

    def protected_imports(self):
        # A policy imported from a KAI or Volcano Queue keeps the fields read from it (the syncs would otherwise
        # overwrite each other); only Kueue-only imports are refreshed.
        return set(QueueClusterState.objects.filter(policy__managed=False,
                                                    family__in=[QueueFamily.KAI, QueueFamily.VOLCANO])
                   .values_list("policy_id", flat=True))

    def still_linked(self, cluster):
        return set(QueueClusterState.objects.filter(cluster=cluster, family__in=[QueueFamily.KAI, QueueFamily.VOLCANO],
                                                    state=SyncState.IMPORTED).values_list("policy_id", flat=True))

    def steps(self, steps):
        out = [self._begin, self._ensure_flavor]
        for step in steps:
            if step is queue_sync.delete_stale:
                out.append(self._local_queues)
            out.append(step)
            if step is queue_sync.delete_stale:
                out.append(self._drop_flavor)
        return tuple(out)

    # --- the family's own steps ------------------------------------------------------------------------------------

    def _begin(self, ctx):
        self.tree = ctx.tree

    def _ensure_flavor(self, ctx):
        """Step 2 (module docstring)."""
        try:
            self.flavor = ctx.api.get_cluster_custom_object(G, V, RF, kd.FLAVOR, _request_timeout=REQUEST_TIMEOUT)
        except ApiException as exc:
            if exc.status != 404:
                _sort_error(ctx, f"ResourceFlavor {kd.FLAVOR}: get", exc)
                return
            self.flavor = None
        except OSError as exc:
            _sort_error(ctx, f"ResourceFlavor {kd.FLAVOR}: get", exc)
            return
        if self.flavor is None:
            if not queue_sync.desired_in(ctx.cluster.id, ctx.tree, ctx.targets):
                return
            self._flavor_write(ctx, "create", ctx.api.create_cluster_custom_object, kd.flavor_body())
        elif not qd.is_ours(self.flavor):
            ctx.result.errors.append(f"ResourceFlavor {kd.FLAVOR} exists in the cluster and is not managed by this "
                                     "gangweb; it is not adopted (gangweb's ClusterQueues name it)")
        elif self.flavor["metadata"].get("deletionTimestamp"):
            return
        elif any((self.flavor.get("spec") or {}).values()):
            self._flavor_write(ctx, "revert drift on", ctx.api.replace_cluster_custom_object, kd.FLAVOR,
                               kd.flavor_body(self.flavor))

    def _flavor_write(self, ctx, verb: str, fn, *args):
        try:
            self.flavor = fn(G, V, RF, *args, _request_timeout=REQUEST_TIMEOUT)
        except (ApiException, OSError) as exc:
            _sort_error(ctx, f"ResourceFlavor {kd.FLAVOR}: {verb}", exc)
            return
        ctx.result.actions.append(f"{verb} ResourceFlavor {kd.FLAVOR}")

    def _drop_flavor(self, ctx):
        """Step 6: delete gangweb's ResourceFlavor once no wanted policy and no ClusterQueue in the cluster (gangweb's
        or not, terminating or not) names it; UID precondition."""
        flavor = self.flavor
        if flavor is None or not qd.is_ours(flavor) or flavor["metadata"].get("deletionTimestamp"):
            return
        if ctx.desired_names or any(_kind(o) == kd.CLUSTER_QUEUE and any(
                k.startswith(f"{kd.FLAVOR}/") for k in kd.flat_fields(o.get("spec"))) for o in ctx.observed.values()):
            return
        if not _deleted(ctx, f"ResourceFlavor {kd.FLAVOR}", flavor, ctx.api.delete_cluster_custom_object,
                        G, V, RF, kd.FLAVOR):
            return
        ctx.result.actions.append(f"delete ResourceFlavor {kd.FLAVOR}")

    def _local_queues(self, ctx):
        """Step 4 (module docstring)."""
        try:
            listing = ctx.api.list_cluster_custom_object(G, V, LQ, _request_timeout=REQUEST_TIMEOUT)
        except (ApiException, OSError) as exc:
            _sort_error(ctx, "LocalQueues: list", exc)
            return
        found = {(o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for o in listing.get("items", [])}
        self.local_queues = {key: o for key, o in found.items() if qd.is_ours(o)}
        wanted: dict[tuple[str, str], object] = {}
        for name, namespaces in self.namespaces.items():
            cq = ctx.observed.get(name)
            if cq is not None and qd.is_ours(cq) and _kind(cq) == kd.CLUSTER_QUEUE:
                for ns in namespaces:
                    wanted[(ns, name)] = ctx.tree.by_name[name]
        for key, policy in sorted(wanted.items()):
            self._want_local_queue(ctx, policy, key, found.get(key))
        for key, obj in sorted(found.items()):
            if key not in wanted and qd.is_ours(obj) and not obj["metadata"].get("deletionTimestamp"):
                self._drop_local_queue(ctx, key, obj)

    def _want_local_queue(self, ctx, policy, key: tuple[str, str], obj: dict | None) -> None:
        ns, name = key
        st = ctx.state_of(policy)
        if obj is None:
            try:
                made = ctx.api.create_namespaced_custom_object(G, V, ns, LQ, kd.local_queue_body(name, ns),
                                                               _request_timeout=REQUEST_TIMEOUT)
            except ApiException as exc:
                if exc.status == 404:  # the namespace does not exist in this cluster (allowed namespaces are global)
                    st.message = _note(st.message, f"no LocalQueue in namespace {ns}: it does not exist here")
                    return
                said = _sort_error(ctx, f"{policy.name}: LocalQueue {ns}/{name}: create", exc)
                st.state, st.message = SyncState.ERROR, _note(st.message, said)
                return
            except OSError as exc:
                st.state, st.message = SyncState.ERROR, _note(st.message, _sort_error(
                    ctx, f"{policy.name}: LocalQueue {ns}/{name}: create", exc))
                return
            self.local_queues[key] = made
            ctx.result.actions.append(f"create LocalQueue {ns}/{name}")
        elif not qd.is_ours(obj):
            st.state = SyncState.ERROR
            st.message = _note(st.message, f"a LocalQueue named '{name}' already exists in namespace {ns} and is "
                                           "not managed by this gangweb; it is not adopted")
            ctx.result.errors.append(f"{policy.name}: LocalQueue {ns}/{name} exists, not ours")
        # gangweb's own: its spec.clusterQueue is immutable (the CRD says so), so a hand edit cannot point it
        # elsewhere; deleted by hand, it is created again by the next pass.

    def _drop_local_queue(self, ctx, key: tuple[str, str], obj: dict) -> None:
        ns, name = key
        held = kd.workloads_held(obj)
        if held:
            ctx.result.errors.append(f"LocalQueue {ns}/{name}: kept, {held} through it")
            policy = ctx.tree.by_name.get(name)
            if policy is not None and policy.managed:
                st = ctx.state_of(policy)
                st.message = _note(st.message, f"LocalQueue {ns}/{name} kept: {held} through it")
            return
        if not _deleted(ctx, f"LocalQueue {ns}/{name}", obj, ctx.api.delete_namespaced_custom_object,
                        G, V, ns, LQ, name):
            return
        self.local_queues.pop(key, None)
        ctx.result.actions.append(f"delete LocalQueue {ns}/{name}")


def _deleted(ctx: queue_sync.SyncContext, what: str, obj: dict, delete, *args) -> bool:
    """Delete `obj` by `delete(*args)` with a UID precondition (never a same-named successor); True when it is gone
    or was already (404), False after recording the error on the pass (`_sort_error`)."""
    try:
        delete(*args, body=client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=obj["metadata"]["uid"])),
               _request_timeout=REQUEST_TIMEOUT)
    except ApiException as exc:
        if exc.status != 404:
            _sort_error(ctx, f"{what}: delete", exc)
            return False
    except OSError as exc:
        _sort_error(ctx, f"{what}: delete", exc)
        return False
    return True


def _note(message: str, more: str) -> str:
    return (f"{message}; {more}" if message else more)[:2000]


def sync_cluster(cluster: Cluster, api: client.CustomObjectsApi | None = None) -> queue_sync.Pass | None:
    """One pass over `cluster`'s Kueue queue objects (the module docstring). Returns the Pass, or None when the
    cluster does not serve Kueue (nothing recorded). Raises TransientKubeError / TerminalKubeError as
    reconcile.queues.sync_cluster does, after recording a ReconcileAttempt (kind "queue", reason KueueQueueSync or
    ListFailed)."""
    if serves_kueue(cluster) is False:
        return None
    return queue_sync.run(cluster, KueueQueues(), api)
