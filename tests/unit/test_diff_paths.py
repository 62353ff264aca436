"""`SchedulerBackend.diff` per kind and per field path: a plugin names the leaves it may patch inside a map-valued
field ("schedulingPolicy.gang.minCount"), per gang kind; a difference at such a leaf alone is a merge patch of that
leaf, anything else in the field (or in another kind) replaces. Existing plugins' top-level fields are unchanged."""
import copy

from scheduling.backends.k8s_workload_v1alpha2 import K8sWorkloadV1alpha2
from scheduling.backends.kai_v2alpha2 import KaiV2alpha2
from tests.unit.test_backends import spec


class MinCountPatchable(K8sWorkloadV1alpha2):
    """A v1alpha2-shaped plugin whose PodGroup `gang.minCount` is mutable and nothing else (as v1beta1's is)."""

    name = "k8s-workload-v9"
    immutable_spec = False
    mutable_by_kind = {"PodGroup": ("schedulingPolicy.gang.minCount",)}


def served(obj, edit):
    out = copy.deepcopy(obj)
    out["metadata"]["uid"] = "u"
    edit(out["spec"])
    return out


def built(backend):
    workload, pod_group = backend.build_gang_objects(spec())
    return workload, pod_group


def test_a_min_count_leaf_alone_is_patched_in_place_and_named_by_its_path():
    backend = MinCountPatchable()
    _, pg = built(backend)
    drift = backend.diff(pg, served(pg, lambda s: s["schedulingPolicy"]["gang"].update(minCount=1)))
    assert (drift.replace, drift.fields) == (False, ["schedulingPolicy.gang.minCount"])
    assert drift.patch == {"spec": {"schedulingPolicy": {"gang": {"minCount": spec().min_member}}}}


def test_a_server_field_is_ignored_and_anything_else_in_the_field_or_another_field_replaces():
    backend = MinCountPatchable()
    _, pg = built(backend)
    # A field only the server sets is no drift: still just the minCount leaf.
    both = backend.diff(pg, served(pg, lambda s: s["schedulingPolicy"]["gang"].update(minCount=1, extra=True)))
    assert (both.replace, both.fields) == (False, ["schedulingPolicy.gang.minCount"])
    basic = backend.diff(pg, served(pg, lambda s: s.update(schedulingPolicy={"basic": {}})))
    assert basic.replace and basic.fields == ["schedulingPolicy"]
    relinked = backend.diff(pg, served(pg, lambda s: s["podGroupTemplateRef"]["workload"].update(workloadName="x")))
    assert relinked.replace and relinked.fields == ["podGroupTemplateRef"]


def test_mutable_paths_are_per_kind():
    backend = MinCountPatchable()
    workload, _ = built(backend)
    # The Workload's minCount sits in a list of templates: no mutable path reaches it, so it replaces.
    drift = backend.diff(workload, served(workload, lambda s: s["podGroupTemplates"][0]["schedulingPolicy"]["gang"]
                                          .update(minCount=1)))
    assert drift.replace and drift.fields == ["podGroupTemplates"]
    assert backend.mutable_paths("Workload") == () and backend.mutable_paths("PodGroup") == (
        "schedulingPolicy.gang.minCount",)


def test_top_level_mutable_fields_keep_their_behaviour():
    backend = KaiV2alpha2()
    [pg] = backend.build_gang_objects(spec())
    drift = backend.diff(pg, served(pg, lambda s: s.update(minMember=1, queue="other")))
    assert (drift.replace, drift.fields) == (False, ["minMember", "queue"])
    assert drift.patch == {"spec": {"minMember": spec().min_member, "queue": spec().queue}}
    assert K8sWorkloadV1alpha2().diff(*built(K8sWorkloadV1alpha2())[1:], served(
        built(K8sWorkloadV1alpha2())[1], lambda s: s["schedulingPolicy"]["gang"].update(minCount=1))).replace
