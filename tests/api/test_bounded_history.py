"""Issue 33 item 5: bounded history. A job whose pods crash-loop for days records thousands of timeline entries,
and its pods thousands of identical Events: the job answer and page stay small (the first and last entries, with
how many are left out), the timeline endpoint pages every entry, identical consecutive entries fold into one with
a count and first/last time, and Events fold by (reason, object)."""
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from scheduling.models import GangJob, PhaseTransition
from scheduling.observe import events
from tests import builders

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


def test_a_job_with_3000_transitions_answers_under_50_kb_with_the_same_queries_as_with_30(api, setup, admin_user):
    small, small_queries = detail(api, crash_looping(setup, admin_user, 330, name="short"))
    big_job = crash_looping(setup, admin_user, 3000)
    big, big_queries = detail(api, big_job)
    assert len(big.content) < 50_000, len(big.content)
    assert big_queries == small_queries <= 8  # pinned: the same however long the history
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
