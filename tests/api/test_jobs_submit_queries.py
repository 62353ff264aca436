"""Submit query budgets: a single submit and a bulk submit of any size each run a fixed number of SQL queries,
and the constraint-first name check still names the clashing job."""
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from scheduling.models import GangJob, PhaseTransition
from tests import builders

pytestmark = pytest.mark.django_db


def _count(api, url, body) -> tuple[int, object]:
    with CaptureQueriesContext(connection) as queries:
        response = api.post(url, body, format="json")
    assert response.status_code == 201, response.data
    return len(queries), response


def test_a_single_submit_reads_lookups_once_and_does_not_read_the_new_job_back(api, setup):
    api.post("/api/v1/jobs/", builders.submit_body(*setup), format="json")  # warm-up
    count, response = _count(api, "/api/v1/jobs/", builders.submit_body(*setup, name="train-q"))
    # 5 lookups (template versions, queues with has-children and parents, clusters, queue->cluster links, queue
    # usage), savepoint, job INSERT, transition INSERT, audit INSERT, release.
    assert count == 10
    assert response.data["name"] == "train-q"
    assert response.data["template"] == setup[0].template.name
    assert [t["phase"] for t in response.data["timeline"]] == ["Submitted"]


def test_a_submit_reads_its_queues_ancestors_not_every_queue(api, setup):
    template, _, cluster = setup
    dept = builders.make_queue("dept", clusters=[cluster])
    team = builders.make_queue("dept-team", parent=dept, clusters=[cluster])
    for i in range(30):
        builders.make_queue(f"other-{i}", parent=dept)
    api.post("/api/v1/jobs/", builders.submit_body(template, team, cluster), format="json")  # warm-up
    count, response = _count(api, "/api/v1/jobs/", builders.submit_body(template, team, cluster))
    assert count == 10  # parents come with the queue lookup
    assert response.data["queue"] == "dept-team"

    deep = team
    for level in range(4):  # 5 levels below dept: the ones past select_related's 3 cost a query per level
        deep = builders.make_queue(f"deep-{level}", parent=deep, clusters=[cluster])
    count, _ = _count(api, "/api/v1/jobs/", builders.submit_body(template, deep, cluster))
    assert count == 12


# Sizes stay under SQLite's 999 parameters per statement (Django splits larger INSERTs there; PostgreSQL does not).
@pytest.mark.parametrize("size", [1, 10, 30])
def test_a_bulk_submit_runs_the_same_queries_whatever_its_size(api, setup, size):
    bodies = [builders.submit_body(*setup) for _ in range(size)]
    count, response = _count(api, "/api/v1/jobs/bulk/", {"jobs": bodies})
    assert count == 10
    assert response.data["count"] == size
    assert [j["name"] for j in response.data["jobs"]] == [b["name"] for b in bodies]
    assert GangJob.objects.count() == PhaseTransition.objects.count() == size


def test_a_bulk_submit_that_reuses_an_active_name_is_409_naming_it_and_creates_nothing(api, setup):
    taken = builders.submit_body(*setup, name="taken")
    assert api.post("/api/v1/jobs/", taken, format="json").status_code == 201
    r = api.post("/api/v1/jobs/bulk/", {"jobs": [builders.submit_body(*setup, name="fresh"), dict(taken)]},
                 format="json")
    assert r.status_code == 409
    assert "an active job 'taken' already exists in namespace 'default'" in str(r.data)
    assert list(GangJob.objects.values_list("name", flat=True)) == ["taken"]
