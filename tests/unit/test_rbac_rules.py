"""Issue 32 row 8: the rights gangweb asks a cluster for (scheduling/kube/rbac.py RULES, rendered by the chart's
ClusterRole) are exactly the kinds its code touches, with writes only where it writes."""
import importlib
import pkgutil

import scheduling
from scheduling.kube import kueue_visibility, rbac
from scheduling.kube.refs import ObjectRef
from scheduling.reconcile import kueue_desired, queue_desired, volcano_desired


def kinds_the_code_names() -> set[tuple[str, str]]:
    """(group, plural) of every ObjectRef defined in scheduling's modules (module constants and class attributes),
    the KAI, Volcano and Kueue queue families (CustomObjectsApi calls) and Events (CoreV1Api list)."""
    found = {(queue_desired.GROUP, queue_desired.PLURAL), (volcano_desired.GROUP, volcano_desired.PLURAL),
             ("", "events"), (kueue_visibility.GROUP, kueue_visibility.RESOURCE),
             *((kueue_desired.GROUP, plural) for plural in kueue_desired.PLURALS.values())}
    for info in pkgutil.walk_packages(scheduling.__path__, "scheduling."):
        if ".migrations" in info.name or info.name.endswith((".tests", ".urls")):
            continue
        module = importlib.import_module(info.name)
        for value in list(vars(module).values()):
            candidates = [value] + (list(vars(value).values()) if isinstance(value, type) else [])
            found |= {(c.group, c.plural) for c in candidates if isinstance(c, ObjectRef)}
    from scheduling.backends import registry
    for cls in registry.all_plugins():  # the status subresources a plugin's `status_writes` patch
        found |= {(getattr(cls, attr).group, f"{getattr(cls, attr).plural}/status") for attr in cls.status_refs}
    return found


def granted() -> dict[tuple[str, str], set[str]]:
    out: dict[tuple[str, str], set[str]] = {}
    for group, resources, verbs in rbac.RULES:
        for resource in resources:
            out.setdefault((group, resource), set()).update(verbs)
    return out


def test_row8_cluster_role_names_exactly_the_kinds_the_code_calls():
    code, rules = kinds_the_code_names(), granted()
    assert set(rules) == code, f"missing: {sorted(code - set(rules))}; unused: {sorted(set(rules) - code)}"
    assert {("", "services"), ("", "limitranges")} <= set(rules)  # needed, and absent from the old ClusterRole
    for kind, verbs in rules.items():
        assert "list" in verbs or "/" in kind[1], kind  # a subresource (Kueue's pendingworkloads) is only read


def test_row8_no_pod_writes_and_no_priority_class_writes():
    rules = granted()
    assert rules[("", "pods")] == {"get", "list", "watch"}
    assert rules[("scheduling.k8s.io", "priorityclasses")] == {"list"}
    writes = {"create", "update", "patch", "delete", "deletecollection"}
    read_only = {kind for kind, verbs in rules.items() if not verbs & writes}
    assert read_only == {("", "pods"), ("", "nodes"), ("", "events"), ("", "limitranges"),
                         ("coordination.k8s.io", "leases"),
                         ("node.k8s.io", "runtimeclasses"), ("scheduling.k8s.io", "priorityclasses"),
                         ("visibility.kueue.x-k8s.io", "localqueues/pendingworkloads")}
    assert not any("*" in resources or "*" in verbs for _, resources, verbs in rbac.RULES)
    assert rules[("kueue.x-k8s.io", "workloads/status")] == {"patch"}  # Kueue's Workload status: patched only


def test_row8_a_request_outside_the_rules_is_recorded_and_logged(caplog):
    from scheduling.kube import objects
    from scheduling.kube.refs import JOB, POD

    class Api:  # stands in for the ApiClient: every call answers {}
        def call_api(self, *args, **kwargs):
            return {}

    objects.rbac_misses.discard("CREATE core/pods")
    objects.create(Api(), JOB, {"metadata": {"namespace": "ns", "name": "j"}})
    assert "CREATE batch/jobs" not in objects.rbac_misses
    objects.create(Api(), POD, {"metadata": {"namespace": "ns", "name": "p"}})
    assert "CREATE core/pods" in objects.rbac_misses
    assert "kube request CREATE core/pods is not in scheduling/kube/rbac.py RULES" in caplog.text
    objects.rbac_misses.discard("CREATE core/pods")
