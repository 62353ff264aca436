"""The dashboard's jobs table pages by keyset (db/keyset.py): for every sort it offers, Next from the first
page and Previous from the last visit every job once, in the sort's order; a cursor of another sort shows the
first page."""
from datetime import timedelta

import pytest
from django.db.models import F
from django.utils import timezone

from scheduling.models import GangJob
from scheduling.models.jobs import IN_PHASE_SINCE
from scheduling.views import jobs as job_views
from tests import builders

pytestmark = pytest.mark.django_db


@pytest.fixture
def jobs(setup, admin_user):
    template, queue, cluster = setup
    queues = [queue, builders.make_queue("b-team", clusters=[cluster]), builders.make_queue("a-team",
                                                                                           clusters=[cluster])]
    phases = ["Running", "Queued", "Succeeded", "Failed"]
    now = timezone.now()
    for i in range(17):
        job = builders.make_job(template, queues[i % 3], cluster, name=f"j-{(i * 5) % 17:02d}", user=admin_user)
        GangJob.objects.filter(pk=job.pk).update(created_at=now - timedelta(minutes=i // 2), phase=phases[i % 4],
                                                 phase_changed_at=now - timedelta(seconds=i % 5))


def _ids(ui, url, link):
    ids = []
    while url:
        page = ui.get(url).context["page"]
        ids.extend(j.pk for j in page.object_list)
        url = getattr(page, link) and "/jobs/?" + getattr(page, link)
    return ids


@pytest.mark.parametrize("sort", sorted(job_views.SORTS))
def test_next_and_previous_visit_every_job_once_in_the_sorts_order(ui, jobs, sort, monkeypatch):
    monkeypatch.setattr(job_views, "PAGE_SIZE", 4)
    expected = list(GangJob.objects.annotate(in_phase_since=IN_PHASE_SINCE, sort_queue_name=F("queue__name"))
                    .order_by(*job_views.SORTS[sort]).values_list("id", flat=True))
    assert _ids(ui, f"/jobs/?sort={sort}", "next") == expected
    last = ui.get(f"/jobs/?sort={sort}").context["page"].last
    backwards = _ids(ui, "/jobs/?" + last, "previous")
    # The last page holds the last 4; each Previous the 4 before.
    assert backwards == [i for end in range(17, 0, -4) for i in expected[max(0, end - 4):end]]


def test_a_cursor_of_another_sort_shows_the_first_page(ui, jobs, monkeypatch):
    monkeypatch.setattr(job_views, "PAGE_SIZE", 4)
    page = ui.get("/jobs/?sort=created&group=phase").context["page"]
    cursor = page.next.split("cursor=")[1].split("&")[0]
    again = ui.get(f"/jobs/?sort=name&cursor={cursor}")
    assert again.status_code == 200
    assert [j.name for j in again.context["page"].object_list] == ["j-00", "j-01", "j-02", "j-03"]
