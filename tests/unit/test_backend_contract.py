"""One contract over every registered plugin: registering a plugin is what gets it tested. For each: the gang objects
it builds (apiVersion/kind among its `gang_kinds`, in that order, named and labelled for the job), the pod stamp
(template not mutated), drift (its own objects as the server returns them are in sync; an extra spec field is not
mistaken for a change), and status read from recorded objects (none -> nothing said; the current, non-terminating
object wins over a terminating one of an earlier generation)."""
import copy

import pytest

from scheduling.backends import registry
from scheduling.backends.base import GangStatus, SchedulerBackend
from scheduling.kube.refs import ObjectRef
from scheduling.reconcile.observed import slim_pod
from tests.unit.test_backends import LABELS, spec

PLUGINS = registry.all_plugins()


def as_served(obj: dict, name: str | None = None, terminating: bool = False, created: str = "2026-12-01T21:00:00Z"):
    """`obj` as the API server would return it: uid, resourceVersion, creationTimestamp, a server-only field."""
    out = copy.deepcopy(obj)
    meta = out["metadata"]
    meta.update(uid=f"uid-{name or meta['name']}", resourceVersion="1", creationTimestamp=created)
    if name:
        meta["name"] = name
    if terminating:
        meta["deletionTimestamp"] = "2026-12-01T21:05:00Z"
    out["spec"]["serverDefaulted"] = "x"
    return out


def test_every_family_has_plugins_and_names_are_unique():
    assert {cls.family for cls in PLUGINS} == set(registry.family_names())
    assert len({cls.name for cls in PLUGINS}) == len(PLUGINS)
    registry.check_registry()


@pytest.mark.parametrize("cls", PLUGINS, ids=lambda c: c.name)
def test_plugin_contract(cls):
    assert issubclass(cls, SchedulerBackend) and cls.name.startswith(cls.family)
    assert cls.available({cls.api_version}) and not cls.available({"v1"})
    assert registry.select(cls.family, {cls.api_version}) is cls
    backend = cls()
    s = spec()
    built = backend.build_gang_objects(s)
    kinds = [(r.api_version, r.kind) for r in cls.gang_kinds]
    assert [(o["apiVersion"], o["kind"]) for o in built] == kinds
    for obj in built:
        assert obj["metadata"]["name"] == s.gang_name and obj["metadata"]["namespace"] == s.namespace
        assert obj["metadata"]["labels"] == LABELS
        assert backend.diff(obj, as_served(obj)).in_sync, obj["kind"]

    template = s.pod_sets[0].template
    before = copy.deepcopy(template)
    stamped = backend.stamp_pod_template(template, s, s.pod_sets[0])
    assert template == before and stamped != before
    if cls.scheduler_name:
        assert stamped["spec"]["schedulerName"] == cls.scheduler_name
    # A pod made from the stamped template belongs to the gang, also as a resync lists it (slim), and not to another.
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": stamped.get("metadata", {}), "spec": stamped["spec"],
           "status": {"phase": "Running"}}
    assert backend.pod_in_group(pod, s.gang_name) and backend.pod_in_group(slim_pod(pod), s.gang_name)
    if cls.releasable_finalizers:  # it names the group: a pod of another generation's group holds nothing
        assert not backend.pod_in_group(pod, "train-old")

    assert backend.read_status([]) == GangStatus()
    served = [as_served(o) for o in built]
    status = backend.read_status(served)
    assert isinstance(status, GangStatus) and status.source.endswith(f"{s.namespace}/{s.gang_name}")
    # An earlier generation's object, terminating, listed first: the current one is read.
    old = [as_served(o, name="train-old", terminating=True, created="2026-12-01T20:00:00Z") for o in built]
    assert backend.read_status([*old, *served]).source == status.source


@pytest.mark.parametrize("cls", PLUGINS, ids=lambda c: c.name)
def test_a_version_subclass_overrides_only_its_refs(cls):
    """The refs are class attributes: a subclass that moves one kind to another API version builds, lists and reads
    that kind there, without restating `gang_kinds` or any hook."""
    moved = cls.gang_refs[-1]
    old = getattr(cls, moved)
    new_ref = ObjectRef(f"{old.group}/v9", old.kind, old.plural)
    later = type("Later", (cls,), {moved: new_ref, "name": f"{cls.family}-v9"})
    assert later.gang_kinds[-1] == new_ref and later.gang_kinds[:-1] == cls.gang_kinds[:-1]
    assert cls.gang_kinds[-1] == old  # the parent is untouched
    built = later().build_gang_objects(spec())
    assert built[-1]["apiVersion"] == f"{old.group}/v9"
    assert later().read_status([as_served(o) for o in built]).source.startswith(old.kind)


@pytest.mark.parametrize("cls", PLUGINS, ids=lambda c: c.name)
def test_a_plugin_expresses_every_pod_sets_minimum_or_declares_it_cannot(cls):
    """Issue 30 item 11: per-set minimums are honoured or refused, never dropped. A plugin that declares
    `per_set_minimums` carries each pod set's own minimum in its gang objects, an optional set's 0 included; one that
    does not says so (`set_minimums` None), and then its family's templates refuse such a set
    (tests/api/test_pod_set_minimums.py)."""
    from scheduling.backends.base import PodSetSpec

    base = spec()
    t = base.pod_sets[0].template
    sets = (PodSetSpec("head", 1, 1, t, "train-head"), PodSetSpec("cpu-workers", 4, 1, t, "train-cpu-workers"),
            PodSetSpec("gpu-workers", 2, 2, t, "train-gpu-workers"), PodSetSpec("extra", 3, 0, t, "train-extra"))
    s = spec(pod_sets=sets, min_member=4)
    built = cls().build_gang_objects(s)
    said = cls().set_minimums(built)
    if cls.per_set_minimums:
        assert said == {"head": 1, "cpu-workers": 1, "gpu-workers": 2, "extra": 0}
    else:
        assert said is None
    assert registry.expresses_set_minimums(cls.family) is cls.per_set_minimums
