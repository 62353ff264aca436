"""Paginated LISTs (kube/objects.py `list_pages`) and the resync's snapshot on disk (reconcile/spilled.py), against a
fake API answering pages by `limit` and `continue` (issue 36: a resync that grows with its work)."""
import uuid
from types import SimpleNamespace

import pytest

from scheduling.backends import kai_v2alpha2
from scheduling.constants import LABEL_JOB_UID
from scheduling.kube import objects
from scheduling.kube.errors import LIST_EXPIRED, TerminalKubeError, TransientKubeError
from scheduling.kube.objects import JOB, POD, SERVICE
from scheduling.reconcile import names
from scheduling.reconcile.observed import Snapshot, kind_key, projection
from scheduling.reconcile.spilled import SpilledSnapshot


def item(name, namespace="team", uid_label=None, kind_extra=None):
    labels = {LABEL_JOB_UID: uid_label} if uid_label else {}
    return {"metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}", "resourceVersion": "7",
                         "labels": labels, "managedFields": [{"manager": "kubectl"}]}, **(kind_extra or {})}


class PagedApi:
    """Answers a LIST of `items` in pages of its `limit`, the continue token being the next index; `expire` lists
    the tokens that answer 410 Gone (each once, or `always`)."""

    def __init__(self, items, expire=(), always=False):
        self.items, self.expire, self.always, self.queries = items, set(expire), always, []

    def __call__(self, api, verb, ref, method, path, *, query=None, raw=False, object_hook=None, **kw):
        q = dict(query)
        self.queries.append(q)
        objects.requests.add(verb, ref)
        token = q.get("continue", "")
        if token in self.expire:
            if not self.always:
                self.expire.discard(token)
            raise TerminalKubeError("Rejected", "HTTP 410 Gone: the provided continue parameter is too old", 410)
        start, size = int(token or 0), int(q["limit"])
        page = [dict(i, metadata=dict(i["metadata"])) for i in self.items[start:start + size]]
        if object_hook is not None:
            page = [object_hook(i) for i in page]
        more = start + size < len(self.items)
        return {"metadata": {"continue": str(start + size) if more else ""}, "items": page}


@pytest.fixture
def paged(monkeypatch):
    def install(items, **kw):
        fake = PagedApi(items, **kw)
        monkeypatch.setattr(objects, "_request", fake)
        return fake
    return install


def test_a_list_of_five_in_pages_of_two_asks_three_times_and_returns_every_object_once(paged, settings):
    settings.GANGWEB_LIST_PAGE_SIZE = 2
    fake = paged([item(f"p-{i}") for i in range(5)])
    listed = objects.list_objects(None, POD, None, "x=y")
    assert [o["metadata"]["name"] for o in listed] == ["p-0", "p-1", "p-2", "p-3", "p-4"]
    assert [(q["limit"], q.get("continue")) for q in fake.queries] == [("2", None), ("2", "2"), ("2", "4")]
    assert all(q["labelSelector"] == "x=y" for q in fake.queries)
    assert listed[0]["kind"] == "Pod" and "managedFields" not in listed[0]["metadata"]


def test_an_expired_continue_token_lists_again_from_the_first_page_without_duplicates(paged, settings):
    settings.GANGWEB_LIST_PAGE_SIZE = 2
    fake = paged([item(f"p-{i}") for i in range(5)], expire={"4"})
    listed = objects.list_objects(None, POD, None, "")
    assert [o["metadata"]["name"] for o in listed] == ["p-0", "p-1", "p-2", "p-3", "p-4"]
    assert [q.get("continue") for q in fake.queries] == [None, "2", "4", None, "2", "4"]


def test_a_continue_token_that_keeps_expiring_is_a_transient_list_expired_after_the_bounded_restarts(paged, settings):
    settings.GANGWEB_LIST_PAGE_SIZE = 2
    fake = paged([item(f"p-{i}") for i in range(5)], expire={"2"}, always=True)
    with pytest.raises(TransientKubeError) as raised:
        objects.list_objects(None, POD, None, "")
    assert raised.value.reason == LIST_EXPIRED and raised.value.status == 410
    assert len(fake.queries) == 2 * (objects.MAX_LIST_RESTARTS + 1)


def test_a_limit_asks_for_the_first_page_only(paged, settings):
    settings.GANGWEB_LIST_PAGE_SIZE = 2
    fake = paged([item(f"p-{i}") for i in range(5)])
    assert len(objects.list_objects(None, POD, None, "", limit=3)) == 3
    assert len(fake.queries) == 1 and fake.queries[0]["limit"] == "3"


def test_pages_are_projected_as_they_are_decoded(paged, settings):
    settings.GANGWEB_LIST_PAGE_SIZE = 2
    paged([item(f"p-{i}", kind_extra={"spec": {"nodeName": "n", "containers": [{"name": "c"}]}}) for i in range(3)])
    pages = list(objects.list_pages(None, POD, None, "", projection(POD)))
    assert [len(p) for p in pages] == [2, 1]
    assert pages[0][0]["spec"] == {"nodeName": "n"}


def _job(uid, namespace="team", owner_uids=None):
    return SimpleNamespace(uid=uuid.UUID(uid), namespace=namespace, owner_uids=owner_uids or {}, name="train",
                           gang_generation=0)


def test_a_job_read_back_from_the_spilled_snapshot_is_what_the_in_memory_snapshot_gives():
    mine, other = str(uuid.uuid4()), str(uuid.uuid4())
    job = _job(mine, owner_uids={"train-w": "uid-train-w"})
    gang_name = names.gang_name(job.name, job.uid, job.gang_generation)
    listed = {
        kai_v2alpha2.POD_GROUP: [item(gang_name, uid_label=mine), item("theirs", uid_label=other)],
        JOB: [item("train-w", uid_label=mine, kind_extra={"spec": {"selector": {"matchLabels": {"j": "train-w"}}}}),
              item("train-w", namespace="elsewhere", uid_label=mine)],
        SERVICE: [item(names.service_name(job.name, job.uid, 0), uid_label=mine)],
        POD: [item(f"train-w-{i}", uid_label=mine, kind_extra={"metadata": {
            "name": f"train-w-{i}", "namespace": "team", "uid": f"pod-{i}",
            "labels": {LABEL_JOB_UID: mine, "j": "train-w"},
            "ownerReferences": [{"uid": "uid-train-w", "controller": True, "apiVersion": "batch/v1", "kind": "Job",
                                 "name": "train-w"}]}})
              for i in range(3)] + [item("unlabelled")],
    }
    backend = SimpleNamespace(gang_kinds=[kai_v2alpha2.POD_GROUP])
    memory = Snapshot()
    with SpilledSnapshot() as disk:
        for ref, items in listed.items():
            for obj in items:
                obj.setdefault("apiVersion", ref.api_version)
                obj.setdefault("kind", ref.kind)
            memory.add(items, ref)
            disk.add(items, ref)
        disk.limit_defaults["team"] = {"cpu": "1"}
        memory.limit_defaults = disk.limit_defaults
        memory.listed_at = disk.listed_at
        assert sorted(u for chunk in disk.uids(size=1) for u in chunk) == sorted([mine, other])
        from_disk, from_memory = disk.take(job, backend), memory.take(job, backend)
    assert from_disk == from_memory
    assert list(from_disk.gang_of(kai_v2alpha2.POD_GROUP)) == [gang_name]
    assert list(from_disk.owners) == ["train-w"]
    assert [p["metadata"]["name"] for p in from_disk.pods] == ["train-w-0", "train-w-1", "train-w-2"]
    assert from_disk.limit_defaults is disk.limit_defaults and from_disk.listed_at == disk.listed_at


def test_a_dropped_kind_is_forgotten_and_the_file_is_removed_on_close():
    uid = str(uuid.uuid4())
    disk = SpilledSnapshot()
    path = disk._dir.name
    disk.add([dict(item("w", uid_label=uid), apiVersion="batch/v1", kind="Job")], JOB)
    disk.drop(JOB)
    assert disk.take(_job(uid), SimpleNamespace(gang_kinds=[])).owners == {}
    assert kind_key(JOB) == "batch/v1/Job"
    disk.close()
    disk.close()
    import os
    assert not os.path.exists(path)
