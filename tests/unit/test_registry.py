"""The registry is the one place that picks a plugin or lists a cluster's gang kinds, and it honours each plugin's
own `available()`: a plugin whose API group/version is served but which says it cannot run is neither chosen, nor
listed, nor watched, and the cluster page says so."""
from __future__ import annotations

import pathlib
from types import SimpleNamespace

import pytest

from scheduling.backends import registry
from scheduling.backends.kai_v2alpha2 import KaiV2alpha2
from scheduling.kube.refs import ObjectRef
from scheduling.reconcile import watching
from scheduling.views.clusters import backend_rows

NEWER = "scheduling.run.ai/v2alpha3"


class Picky(KaiV2alpha2):
    """A later KAI version that also needs the Queue API to be served."""

    name = "kai-v2alpha3"
    api_version = NEWER
    POD_GROUP = ObjectRef(NEWER, "PodGroup", "podgroups")

    @classmethod
    def available(cls, served: set[str]) -> bool:
        return cls.api_version in served and "scheduling.run.ai/v2" in served


@pytest.fixture
def picky_registered(monkeypatch):
    monkeypatch.setitem(registry.FAMILIES, "kai", [f"{__name__}.Picky", "scheduling.backends.kai_v2alpha2.KaiV2alpha2"])


def test_a_plugin_that_says_it_cannot_run_is_not_chosen_listed_or_watched(picky_registered):
    served = {NEWER, KaiV2alpha2.api_version}  # the PodGroup version is served, the Queue API is not
    assert registry.select("kai", served) is KaiV2alpha2
    assert registry.plugin_for(family="kai", served=served) is KaiV2alpha2
    assert Picky.POD_GROUP not in registry.gang_kinds(served)
    assert KaiV2alpha2.POD_GROUP in registry.gang_kinds(served)
    cluster = SimpleNamespace(served_apis=sorted(served), scheduler_presence={})
    assert watching.gang_kinds(cluster) == registry.gang_kinds(served)  # the watch and the resync agree
    rows = {r["name"]: r for r in backend_rows(cluster)}
    assert (rows["kai-v2alpha3"]["served"], rows["kai-v2alpha3"]["chosen"]) == (False, False)
    assert (rows["kai-v2alpha2"]["served"], rows["kai-v2alpha2"]["chosen"]) == (True, True)

    with_queues = served | {"scheduling.run.ai/v2"}
    assert registry.select("kai", with_queues) is Picky
    assert Picky.POD_GROUP in registry.gang_kinds(with_queues)


def test_plugin_for_prefers_the_recorded_name_and_never_guesses(picky_registered):
    assert registry.plugin_for("kai-v2alpha2", "kai", {NEWER, "scheduling.run.ai/v2"}) is KaiV2alpha2
    assert registry.plugin_for("kai-v0", "kai", {KaiV2alpha2.api_version}) is None  # an unknown name is not replaced
    assert registry.plugin_for(family="slurm", served={"v1"}) is None
    assert registry.plugin_for(family="kai", served={"v1"}) is None
    assert registry.newest("kai") is Picky and registry.newest("slurm") is None
    assert registry.api_versions("kai") == [NEWER, KaiV2alpha2.api_version]


def test_a_never_probed_cluster_watches_every_plugins_kinds():
    every = registry.gang_kinds(None)
    for cls in registry.all_plugins():
        assert set(cls.gang_kinds) <= set(every)
    assert watching.gang_kinds(SimpleNamespace(served_apis=[])) == every
    assert registry.gang_kinds(set()) == []


SELECTION = ("all_plugins(", "registry.plugins(", ".api_version in served", "registry.FAMILIES")


def test_selection_is_written_once():
    """No module outside backends/ walks the plugins itself: they ask the registry."""
    root = pathlib.Path(__file__).resolve().parents[2] / "scheduling"
    found = [f"{path.relative_to(root)}: {needle}" for path in root.rglob("*.py") if path.parent.name != "backends"
             for needle in SELECTION if needle in path.read_text()]
    assert found == []
