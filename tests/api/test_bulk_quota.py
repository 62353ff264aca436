"""Bulk submits have a per-user quota of jobs per minute (issue 15, L9): settings.GANGWEB_BULK_JOBS_PER_MINUTE,
off under testing and turned on here. Fixed one-minute windows; a bulk over what is left of the quota is a 429
with Retry-After (seconds to the next window) and creates nothing; refused and replayed bulks are not counted."""
import pytest
from django.core.cache import cache

from scheduling.api.throttling import BulkJobsQuota
from scheduling.models import GangJob
from tests import builders

pytestmark = pytest.mark.django_db


@pytest.fixture
def quota(settings, monkeypatch):
    settings.GANGWEB_BULK_JOBS_PER_MINUTE = 10
    cache.clear()

    class Clock:
        now = 1_800_000_000.0  # a whole minute

    clock = Clock()
    monkeypatch.setattr(BulkJobsQuota, "clock", staticmethod(lambda: clock.now))
    yield clock
    cache.clear()


def bulk(api, setup, n, prefix, key=None):
    jobs = [builders.submit_body(*setup, name=f"{prefix}-{i}") for i in range(n)]
    headers = {"HTTP_IDEMPOTENCY_KEY": key} if key else {}
    return api.post("/api/v1/jobs/bulk/", {"jobs": jobs}, format="json", **headers)


def test_bulk_submits_past_the_jobs_per_minute_quota_are_429_and_create_nothing(api, setup, quota):
    assert bulk(api, setup, 6, "a", key="k1").status_code == 201
    assert bulk(api, setup, 6, "a", key="k1").status_code == 201  # a replay creates nothing and costs nothing
    quota.now += 15
    before = GangJob.objects.count()
    r = bulk(api, setup, 5, "b")
    assert r.status_code == 429, r.data
    assert r["Retry-After"] == "45"
    assert "at most 10 jobs per minute" in r.data["detail"]
    assert GangJob.objects.count() == before
    assert bulk(api, setup, 4, "c").status_code == 201  # what is left of the minute
    quota.now += 45  # the next minute
    assert bulk(api, setup, 10, "d").status_code == 201
    assert GangJob.objects.count() == before + 14


def test_a_refused_bulk_is_not_counted_and_one_larger_than_the_quota_is_400(api, setup, quota):
    bad = [dict(builders.submit_body(*setup, name="x"), queue="nope")] * 3
    assert api.post("/api/v1/jobs/bulk/", {"jobs": bad}, format="json").status_code == 400
    assert bulk(api, setup, 10, "a").status_code == 201
    quota.now += 60
    r = bulk(api, setup, 11, "b")
    assert r.status_code == 400
    assert "split it into smaller requests" in r.data["jobs"][0]


def test_the_quota_is_per_user(api, setup, quota, teams_free_user):
    assert bulk(api, setup, 10, "a").status_code == 201
    assert bulk(teams_free_user, setup, 10, "b").status_code == 201
    assert bulk(api, setup, 1, "c").status_code == 429


@pytest.fixture
def teams_free_user(setup):
    from rest_framework.test import APIClient

    user = builders.make_user("other")
    builders.grant(setup[1], "submitter", user=user)
    client = APIClient()
    client.force_authenticate(user)
    return client
