"""Issue 33 item 5: bounded history. A job whose pods crash-loop for days records thousands of timeline entries,
and its pods thousands of identical Events: the job answer and page stay small (the first and last entries, with
how many are left out), the timeline endpoint pages every entry, identical consecutive entries fold into one with
a count and first/last time, and Events fold by (reason, object)."""
import json
from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from scheduling.models import GangJob, PhaseTransition
from scheduling.observe import events
from scheduling.observe.evidence import JobObjects
from scheduling.reconcile import derive, waiting_events
from tests import builders
from tests.kube_objects import pod

pytestmark = pytest.mark.django_db
CYCLE = [("Queued", "BackOff", "pods restarting"), ("Scheduled", "Scheduled", "gang placed"),
         ("Running", "AllPodsRunning", "")]


def crash_looping(setup, admin_user, entries: int, name: str = "loop") -> GangJob:
    """A job with `entries` more timeline entries: re-queued, scheduled and running again, attempt after attempt,
    then a stretch of identical evictions (the last 300: folded into one)."""
    job = builders.make_job(*setup, name=name, user=admin_user)
    t0 = job.transitions.get().at
    rows = []
    for i in range(entries - 300):
        phase, reason, message = CYCLE[i % 3]
        rows.append(PhaseTransition(job=job, phase=phase, attempt=i // 3, at=t0 + timedelta(seconds=i + 1),
                                    source="Pod default/loop-0", reason=reason, message=message))
    last = (entries - 300) // 3 + 1
    for i in range(300):
        rows.append(PhaseTransition(job=job, phase="Queued", attempt=last + i,
                                    at=t0 + timedelta(seconds=entries + i), source="Pod default/loop-0",
                                    reason="Evicted", message="The node was low on resource: memory."))
    PhaseTransition.objects.bulk_create(rows)
    GangJob.objects.filter(pk=job.pk).update(phase="Queued")
    return job


def detail(api, job, **kw):
    from django.core.cache import cache

    cache.clear()  # each answer computed afresh (the estimate and the cluster view are cached a few seconds)
    with CaptureQueriesContext(connection) as queries:
        r = api.get(f"/api/v1/jobs/{job.pk}/", **kw)
    assert r.status_code == 200
    return r, len(queries)


def page_of(client, pk: int):
    """The job page of `pk` computed afresh, and how many queries it took."""
    from django.core.cache import cache

    cache.clear()
    with CaptureQueriesContext(connection) as queries:
        page = client.get(f"/jobs/{pk}/")
    return page, len(queries)


def test_a_job_with_3000_transitions_answers_under_50_kb_with_the_same_queries_as_with_30(api, setup, admin_user):
    small, small_queries = detail(api, crash_looping(setup, admin_user, 330, name="short"))
    big_job = crash_looping(setup, admin_user, 3000)
    big, big_queries = detail(api, big_job)
    assert len(big.content) < 50_000, len(big.content)
    assert big_queries == small_queries <= 9  # pinned: the same however long the history (9: +1 recent submissions)
    data = big.json()
    assert data["timeline_total"] == 3001  # Submitted + 3,000
    # 2,701 entries that alternate, then 300 identical evictions folded into one: 2,702 folded, 50 shown.
    assert (len(data["timeline"]), data["timeline_omitted"]) == (50, 2702 - 50)
    assert [e["phase"] for e in data["timeline"][:4]] == ["Submitted", "Queued", "Scheduled", "Running"]
    evicted = data["timeline"][-1]
    assert (evicted["reason"], evicted["count"]) == ("Evicted", 300)
    assert evicted["first_at"] < evicted["last_at"] and evicted["first_at"] == evicted["at"]
    assert data["timeline"][-2]["count"] == 1


def test_the_timeline_endpoint_pages_every_entry(api, setup, admin_user):
    job = crash_looping(setup, admin_user, 3000)
    first = api.get(f"/api/v1/jobs/{job.pk}/timeline/?limit=1000")
    assert first.status_code == 200 and len(first.json()) == 1000
    assert first["X-Total-Count"] == "3001"
    assert first["Link"].endswith(f'/api/v1/jobs/{job.pk}/timeline/?offset=1000&limit=1000>; rel="next"')
    last = api.get(f"/api/v1/jobs/{job.pk}/timeline/?offset=3000&limit=1000")
    assert [e["reason"] for e in last.json()] == ["Evicted"] and "Link" not in last
    bad = api.get(f"/api/v1/jobs/{job.pk}/timeline/?limit=0&offset=x")
    assert bad.status_code == 400 and set(bad.json()) == {"limit", "offset"}


def test_the_job_page_stays_under_200_kb(client, setup, admin_user):
    job = crash_looping(setup, admin_user, 3000)
    client.force_login(admin_user)
    page = client.get(f"/jobs/{job.pk}/")
    assert page.status_code == 200
    assert len(page.content) < 200_000, len(page.content)
    assert "2652 more entries between" in page.content.decode()


def test_5000_identical_events_are_one_entry_with_count_and_first_and_last_seen():
    def ev(i):
        return {"type": "Warning", "reason": "FailedScheduling", "message": f"0/4 nodes are available ({i})",
                "involvedObject": {"kind": "Pod", "namespace": "default", "name": "p-0", "uid": "u"},
                "firstTimestamp": f"2026-12-06T08:{i // 60 % 60:02d}:{i % 60:02d}Z",
                "lastTimestamp": f"2026-12-06T08:{i // 60 % 60:02d}:{i % 60:02d}Z", "count": 1}

    rows = events.fold(events.select([ev(i) for i in range(3600)] + [ev(i) for i in range(1400)], {"u"}))
    assert len(rows) == 1
    (row,) = rows
    assert (row["count"], row["object"], row["reason"]) == (5000, "Pod default/p-0", "FailedScheduling")
    assert (row["first_at"], row["last_at"]) == ("2026-12-06T08:00:00+00:00", "2026-12-06T08:59:59+00:00")
    assert row["message"] == "0/4 nodes are available (3599)"  # the newest words


def test_the_wait_answer_carries_the_last_50_entries_in_order(api, setup, admin_user):
    job = crash_looping(setup, admin_user, 3000)
    r = api.get(f"/api/v1/jobs/wait/?ids={job.pk}&timeout=0")
    assert r.status_code == 200, r.content
    (state,) = r.json()["jobs"]
    assert (len(state["timeline"]), state["timeline_total"]) == (50, 3001)
    assert [e["reason"] for e in state["timeline"][-3:]] == ["Evicted"] * 3
    assert len(r.content) < 50_000


class EventPages:
    """Stands in for CoreV1Api.list_namespaced_event: `events` served in pages of the asked `limit` with a
    continue token, filtered by the `involvedObject.uid=` and `type=` field selectors as the API server does;
    every call's field selector is recorded in `asked`."""

    def __init__(self, events_: list[dict]):
        self.events, self.asked = events_, []

    def __call__(self, _api=None):
        return self

    def list_namespaced_event(self, namespace, field_selector="", limit=500, _continue=None, **_):
        self.asked.append(field_selector)
        wants = dict(part.split("=", 1) for part in field_selector.split(","))
        items = [e for e in self.events if e["involvedObject"]["uid"] == wants["involvedObject.uid"]
                 and e["type"] == wants["type"]]
        start = int(_continue or 0)
        page = items[start:start + limit]
        more = str(start + limit) if start + limit < len(items) else None
        return SimpleNamespace(data=json.dumps({"items": page, "metadata": {"continue": more}}).encode())


def failed_scheduling(i: int, uid: str) -> dict:
    """The i-th of a pod's identical FailedScheduling Events, one second apart from 08:00:00, each seen once (a
    recorder that could not merge them)."""
    when = f"2026-12-06T{8 + i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d}Z"
    return {"type": "Warning", "reason": "FailedScheduling", "message": "0/4 nodes are available: 4 Insufficient "
            "nvidia.com/gpu. preemption: 0/4 nodes are available: 4 No preemption victims found.",
            "involvedObject": {"kind": "Pod", "namespace": "default", "name": "loop-worker-0", "uid": uid},
            "firstTimestamp": when, "lastTimestamp": when, "count": 1, "source": {"component": "default-scheduler"},
            "metadata": {"name": f"loop-worker-0.{i:x}", "creationTimestamp": when}}


def test_3000_transitions_and_5000_identical_events_stay_small_and_say_how_often_and_since_when(
        api, client, setup, admin_user, monkeypatch):
    """The read path (reconcile/waiting_events.py) pages the pod's 5,000 Events, the observation folds them into
    one why-pending entry, and the job's answer and page show it with its count and first/last seen, within the
    same budgets as without it."""
    job = crash_looping(setup, admin_user, 3000)
    pods = [pod(name=f"loop-worker-{i}", unschedulable="0/4 nodes are available") for i in range(2)]
    noise = [{**failed_scheduling(0, "uid-loop-worker-0"), "type": "Normal", "reason": "Scheduled"},
             failed_scheduling(1, "uid-of-another-job")]
    served = EventPages([failed_scheduling(i, "uid-loop-worker-0") for i in range(5000)] + noise)
    monkeypatch.setattr(waiting_events.client, "CoreV1Api", served)
    said = waiting_events.read(job, [], pods, api=object())
    assert served.asked == ["involvedObject.uid=uid-loop-worker-0,type=Warning"] * 10  # 10 pages of 500
    sighting = derive.Sighting(None, JobObjects([], [], pods), [], said=said)
    _, changes = derive.derive(GangJob.objects.select_related("cluster", "queue").get(pk=job.pk), sighting, [])
    GangJob.objects.filter(pk=job.pk).update(why_pending=changes["why_pending"])

    r, queries = detail(api, job)
    assert len(r.content) < 50_000, len(r.content)
    (entry,) = r.json()["why_pending"]["said"]
    assert (entry["reason"], entry["object"], entry["count"], entry["component"]) == (
        "FailedScheduling", "Pod default/loop-worker-0", 5000, "default-scheduler")
    assert (entry["first_at"], entry["last_at"]) == ("2026-12-06T08:00:00+00:00", "2026-12-06T09:23:19+00:00")
    small, small_queries = detail(api, crash_looping(setup, admin_user, 330, name="short"))
    assert queries == small_queries <= 9  # pinned: neither the history nor the Events add a query

    client.force_login(admin_user)
    GangJob.objects.filter(pk=small.json()["id"]).update(why_pending=changes["why_pending"])
    page, page_queries = page_of(client, job.pk)
    _, short_queries = page_of(client, small.json()["id"])
    assert page_queries == short_queries <= 12, "the page's queries grow with the history"
    assert page.status_code == 200 and len(page.content) < 200_000, len(page.content)
    html = page.content.decode()
    assert ("<strong>FailedScheduling</strong> on <span class=\"mono\">Pod default/loop-worker-0</span> by "
            "default-scheduler: <span data-field=\"count\">5,000</span> times, first seen <span class=\"mono\" "
            "data-field=\"first\">2026-12-06 08:00:00 UTC</span>, last seen <span class=\"mono\" "
            "data-field=\"last\">2026-12-06 09:23:19 UTC</span>") in html


def test_an_observation_that_does_not_read_events_keeps_what_the_last_read_found(setup, admin_user):
    """The watch reads no Events: the stored entry stays (the answer does not flip between observers)."""
    job = crash_looping(setup, admin_user, 330, name="kept")
    pods = [pod(name="kept-worker-0", unschedulable="0/4 nodes are available")]
    said = events.said([events.row(failed_scheduling(i, "u")) for i in range(3)])
    row = GangJob.objects.select_related("cluster", "queue").get(pk=job.pk)
    _, changes = derive.derive(row, derive.Sighting(None, JobObjects([], [], pods), [], said=said), [])
    GangJob.objects.filter(pk=job.pk).update(why_pending=changes["why_pending"])
    row = GangJob.objects.select_related("cluster", "queue").get(pk=job.pk)
    _, unread = derive.derive(row, derive.Sighting(None, JobObjects([], [], pods), []), [])
    assert unread["why_pending"]["said"] == changes["why_pending"]["said"]
    assert changes["why_pending"]["said"][0]["count"] == 3
