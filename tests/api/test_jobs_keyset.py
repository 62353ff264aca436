"""GET /api/v1/jobs/ pages by keyset (db/keyset.py): following `next` (and back with `previous`, or from
`last`) visits every job once in the list's order, for every ordering the API and the dashboard offer, with ties
in the sort key and NULLs in a nullable one; `offset` still pages the old way; a bad cursor is a 400 naming it."""
import json
import os
from datetime import timedelta

import pytest
from django.utils import timezone

from scheduling.api import pagination
from scheduling.models import GangJob
from tests import builders

pytestmark = pytest.mark.django_db

PHASES = ["Running", "Queued", "Succeeded", "Failed", "Submitted"]


@pytest.fixture
def jobs(api, setup):
    """23 jobs: created_at in groups of 3 equal times (ties), every 4th with no phase_changed_at (NULL), phases
    cycling, names not in id order."""
    api.post("/api/v1/jobs/bulk/", {"jobs": [builders.submit_body(*setup, name=f"j-{(i * 7) % 23:02d}")
                                             for i in range(23)]}, format="json")
    now = timezone.now()
    for i, job in enumerate(GangJob.objects.order_by("id")):
        GangJob.objects.filter(pk=job.pk).update(
            created_at=now - timedelta(minutes=i // 3), phase=PHASES[i % len(PHASES)],
            phase_changed_at=None if i % 4 == 0 else now - timedelta(seconds=(i * 37) % 11))
    return list(GangJob.objects.values_list("id", flat=True))


def _walk(api, url, link="next"):
    ids, pages = [], 0
    while url:
        response = api.get(url)
        assert response.status_code == 200, response.data
        ids.extend(r["id"] for r in response.data["results"])
        url, pages = response.data[link], pages + 1
        assert pages < 50
    return ids, pages


@pytest.mark.parametrize("ordering", ["", "-created_at", "created_at", "name", "-name", "phase", "-phase",
                                      "phase_changed_at", "-phase_changed_at"])
def test_following_next_visits_every_job_once_in_the_lists_order(api, jobs, ordering):
    query = f"?ordering={ordering}&" if ordering else "?"
    expected = [r["id"] for r in api.get(f"/api/v1/jobs/{query}offset=0&limit=100").data["results"]]
    assert sorted(expected) == sorted(jobs)
    ids, pages = _walk(api, f"/api/v1/jobs/{query}limit=5")
    assert (ids, pages) == (expected, 5)
    # Backwards from the last page with `previous`: the same rows, the last page holding the last 5.
    last = api.get(api.get(f"/api/v1/jobs/{query}limit=5").data["last"])
    assert ([r["id"] for r in last.data["results"]], last.data["next"]) == (expected[-5:], None)
    back, _ = _walk(api, last.data["previous"], "previous")
    back_pages = [expected[max(0, end - 5):end] for end in range(18, 0, -5)]
    assert back == [i for page in back_pages for i in page]


def test_filters_and_groups_page_by_keyset_too(api, jobs):
    for query in ("phase=Running&phase=Queued", "group=phase&ordering=name", "group=queue", "name=j-1"):
        expected = [r["id"] for r in api.get(f"/api/v1/jobs/?{query}&offset=0&limit=100").data["results"]]
        assert _walk(api, f"/api/v1/jobs/?{query}&limit=2")[0] == expected


def test_the_count_is_exact_up_to_the_cap_and_says_when_it_is_capped(api, jobs, monkeypatch):
    data = api.get("/api/v1/jobs/?limit=5").data
    assert (data["count"], data["count_capped"]) == (23, False)
    monkeypatch.setattr(pagination, "COUNT_CAP", 10)
    data = api.get("/api/v1/jobs/?limit=5").data
    assert (data["count"], data["count_capped"], len(data["results"])) == (10, True, 5)
    assert api.get("/api/v1/jobs/?limit=5&offset=20").data["count"] == 23  # the old pages count exactly


def test_offset_pages_answer_as_before(api, jobs):
    data = api.get("/api/v1/jobs/?limit=10&offset=20").data
    assert (set(data), len(data["results"]), data["next"]) == ({"count", "next", "previous", "results"}, 3, None)
    assert "offset=10" in data["previous"]


def _cursor(values, direction="next"):
    import base64
    return base64.urlsafe_b64encode(json.dumps({"k": values, "d": direction}).encode()).decode()


@pytest.mark.parametrize("cursor", ["nonsense!", _cursor([1]), "e30", _cursor(["2026-13-40T00:00:00Z", 5]),
                                    _cursor(["2026-01-01T00:00:00Z", 10**30]), _cursor(["2026-01-01", "x"]),
                                    _cursor([True, 1]), _cursor([[1], 1]), _cursor(None, "sideways")])
def test_a_cursor_this_list_did_not_make_is_a_400_naming_it(api, jobs, cursor):
    response = api.get(f"/api/v1/jobs/?cursor={cursor}")
    assert response.status_code == 400 and "cursor" in response.data, response.data


def test_a_cursor_without_a_time_zone_reads_as_utc(api, jobs):
    newest = GangJob.objects.order_by("-created_at", "-id").first()
    naive = newest.created_at.replace(tzinfo=None).isoformat()  # stored in UTC
    response = api.get(f"/api/v1/jobs/?cursor={_cursor([naive, newest.pk])}")
    assert response.status_code == 200 and newest.pk not in [r["id"] for r in response.data["results"]]


def test_a_cursor_of_another_sort_order_is_a_400(api, jobs):
    nxt = api.get("/api/v1/jobs/?limit=5&group=phase").data["next"]  # three keys: group rank, created_at, id
    cursor = nxt.split("cursor=")[1].split("&")[0]
    response = api.get(f"/api/v1/jobs/?cursor={cursor}")
    assert response.status_code == 400 and "cursor" in response.data


@pytest.mark.skipif(not os.environ.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://")),
                    reason="PostgreSQL plans")
@pytest.mark.parametrize("ordering, index", [("", "job_created_id"), ("name", "job_name_id"),
                                             ("-phase", "job_phase_id"), ("phase_changed_at", "job_in_phase_since")])
def test_a_keyset_page_starts_its_index_scan_at_the_cursor(api, jobs, ordering, index):
    """The leading bound is an index condition (where the scan starts), not a filter over every row before it:
    PostgreSQL took `k < v OR k = v` as a filter, and page 5,000 read 250,000 index entries (bench/README.md)."""
    from django.db import connection

    nxt = api.get(f"/api/v1/jobs/?limit=5&ordering={ordering}").data["next"]
    seen = []

    def keep(execute, sql, params, many, context):
        if sql.startswith("SELECT") and "LIMIT 6" in sql:
            seen.append((sql, params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(keep):
        assert api.get(nxt).status_code == 200
    with connection.cursor() as cur:
        cur.execute("SET LOCAL enable_seqscan = off")
        cur.execute("SET LOCAL enable_sort = off")
        cur.execute(f"EXPLAIN (FORMAT JSON) {seen[0][0]}", seen[0][1])
        raw = cur.fetchone()[0]
    plan = (raw if isinstance(raw, list) else json.loads(raw))[0]["Plan"]
    scans = [n for n in _nodes(plan) if n.get("Index Name") == index]
    assert scans and all(n.get("Index Cond") for n in scans), plan


def _nodes(plan):
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)
