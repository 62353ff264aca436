"""Job list query budget: the same queries whatever the number of jobs, and no DISTINCT for a phase filter."""
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

pytestmark = pytest.mark.django_db


def _list(api, url):
    with CaptureQueriesContext(connection) as queries:
        response = api.get(url)
    assert response.status_code == 200, response.data
    return response, [q["sql"] for q in queries]


@pytest.mark.parametrize("url", ["/api/v1/jobs/", "/api/v1/jobs/?phase=Submitted",
                                 "/api/v1/jobs/?phase=Submitted&phase=Running"])
def test_the_job_list_runs_the_same_queries_for_3_and_30_jobs_without_distinct(api, setup, url):
    from tests import builders

    api.post("/api/v1/jobs/bulk/", {"jobs": [builders.submit_body(*setup) for _ in range(3)]}, format="json")
    small, small_sql = _list(api, url)
    api.post("/api/v1/jobs/bulk/", {"jobs": [builders.submit_body(*setup) for _ in range(27)]}, format="json")
    large, large_sql = _list(api, url)
    assert (small.data["count"], large.data["count"]) == (3, 30)
    assert len(small_sql) == len(large_sql) == 2  # COUNT, then the page with its relations joined
    assert not any("DISTINCT" in sql for sql in large_sql)
    assert "resolved_spec" not in large_sql[-1]  # the list form never shows it


@pytest.mark.parametrize("url, queries", [("/api/v1/jobs/?group=queue&name=job", 2),
                                          ("/api/v1/jobs/groups/?group=queue", 2),
                                          ("/api/v1/jobs/groups/?group=phase", 1)])
def test_grouped_lists_and_group_counts_run_the_same_queries_for_3_and_30_jobs(api, setup, url, queries):
    from tests import builders

    api.post("/api/v1/jobs/bulk/", {"jobs": [builders.submit_body(*setup) for _ in range(3)]}, format="json")
    _, small_sql = _list(api, url)
    api.post("/api/v1/jobs/bulk/", {"jobs": [builders.submit_body(*setup) for _ in range(27)]}, format="json")
    large, large_sql = _list(api, url)
    assert len(small_sql) == len(large_sql) == queries
    if "groups" in url:
        assert sum(g["count"] for g in large.data["groups"]) == 30
