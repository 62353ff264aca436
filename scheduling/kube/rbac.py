"""The Kubernetes rights gangweb's calls need in a managed cluster: the ClusterRole of in-cluster mode
(charts/gangweb/templates/rbac.yaml renders exactly `RULES`) and what a cluster admin grants gangweb's identity in
any other cluster (docs/operations.md).

Kept beside the client so that a new call and its right change together: `tests/unit/test_rbac_rules.py` checks that
every kind the code names (each `ObjectRef`, the KAI and Volcano Queue families, Events) has a rule and that no rule
names a kind the code never touches; `tests/cluster/test_helm_chart.py` that the chart's ClusterRole equals `RULES`.
Where each verb comes from (issue 32 row 8):

- gang objects (`backends/*`: Workload/PodGroup of scheduling.k8s.io, KAI, Volcano, coscheduling), Jobs and
  Services (`reconcile/jobs/reconciler.py` create and owner-reference merge-patch, `cleanup.py` delete and finalizer
  patch, `reconcile/cluster_watcher.py` list and watch, `conflicts.py` and `reconcile/left_behind.py` get): get, list,
  watch, create, patch, delete;
- Kueue Workloads' status subresource (`backends/kueue_v1beta2.py` `status_writes`, written by
  `reconcile/jobs/admission.py`: a reservation cleared after an eviction, Finished): patch;
- pods: get, list, watch only (`reconcile/cluster_watcher.py`, `services/jobs/events.py`, `kube/node_pods.py`: what
  other pods request per node, for the capacity view); gangweb never creates, updates, patches or
  deletes a pod (the Job controller does; pods go with their Job's propagation);
- events: list (`services/jobs/events.py`, `reconcile/refusals.py`,
  `reconcile/waiting_events.py`, `kube/scheduler_presence.py`);
- leases (coordination.k8s.io): list, by name (`kube/scheduler_presence.py`: is a scheduler's leader renewing);
- nodes: list, watch (capacity, `reconcile/cluster_watcher.py`); limitranges, runtimeclasses, priorityclasses: list
  (submit checks: `kube/limit_ranges.py`, `runtime_classes.py`, `priority_classes.py`) - never written;
- KAI and Volcano Queues (cluster-scoped; `reconcile/queue_sync.py`, `volcano_queues.py`): get, list, create,
  update (replace), delete;
- Kueue's visibility API (`kube/kueue_visibility.py`: a pending job's place in line): get on the LocalQueue
  subresource `pendingworkloads` only (a read of what Kueue computes; never a list of Kueue's objects).
- Kueue's queue objects (`reconcile/kueue_queues.py`): Cohorts and ClusterQueues list, create, update (replace),
  delete; LocalQueues list (every namespace), create, delete (their `spec.clusterQueue` is immutable: never
  updated); the ResourceFlavor `gangweb-default` get, list, create, update, delete.
"""
from __future__ import annotations

GANG_VERBS = ("get", "list", "watch", "create", "patch", "delete")
READ = ("get", "list", "watch")

# (apiGroup, resources, verbs): the ClusterRole's rules in this order.
RULES: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("", ("pods",), READ),
    ("", ("nodes",), ("list", "watch")),
    ("", ("events",), ("list",)),
    ("", ("limitranges",), ("list",)),
    ("coordination.k8s.io", ("leases",), ("list",)),
    ("", ("services",), GANG_VERBS),
    ("batch", ("jobs",), GANG_VERBS),
    ("node.k8s.io", ("runtimeclasses",), ("list",)),
    ("scheduling.k8s.io", ("priorityclasses",), ("list",)),
    ("scheduling.k8s.io", ("workloads", "podgroups"), GANG_VERBS),
    ("scheduling.run.ai", ("podgroups",), GANG_VERBS),
    ("scheduling.volcano.sh", ("podgroups",), GANG_VERBS),
    ("scheduling.x-k8s.io", ("podgroups",), GANG_VERBS),
    ("kueue.x-k8s.io", ("workloads",), GANG_VERBS),
    ("kueue.x-k8s.io", ("workloads/status",), ("patch",)),
    ("scheduling.run.ai", ("queues",), ("get", "list", "create", "update", "delete")),
    ("scheduling.volcano.sh", ("queues",), ("get", "list", "create", "update", "delete")),
    ("visibility.kueue.x-k8s.io", ("localqueues/pendingworkloads",), ("get",)),
    ("kueue.x-k8s.io", ("cohorts", "clusterqueues"), ("list", "create", "update", "delete")),
    ("kueue.x-k8s.io", ("localqueues",), ("list", "create", "delete")),
    ("kueue.x-k8s.io", ("resourceflavors",), ("get", "list", "create", "update", "delete")),
)

# objects.py's request names -> the RBAC verb they need.
VERB_OF = {"LIST": "list", "GET": "get", "CREATE": "create", "PATCH": "patch", "DELETE": "delete",
           "WATCH": "watch", "UPDATE": "update"}


def allowed(verb: str, group: str, resource: str) -> bool:
    """True when `RULES` grant `verb` (an RBAC verb, or one of objects.py's request names) on `group`/`resource`."""
    verb = VERB_OF.get(verb, verb)
    return any(g == group and resource in resources and verb in verbs for g, resources, verbs in RULES)


def as_policy_rules() -> list[dict]:
    """`RULES` as Kubernetes PolicyRule dicts ({"apiGroups": [...], "resources": [...], "verbs": [...]})."""
    return [{"apiGroups": [group], "resources": list(resources), "verbs": list(verbs)}
            for group, resources, verbs in RULES]
