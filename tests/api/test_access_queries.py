"""Permission checks cost a fixed number of queries, whatever the number of rows or of jobs in a bulk submit."""
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from scheduling.services.jobs import lifecycle as job_service
from tests import builders

pytestmark = pytest.mark.django_db


def count_queries(fn, skip=("INSERT", "SAVEPOINT", "RELEASE")):
    """Queries run by fn(), leaving out the INSERT batches (SQLite splits large bulk inserts) and savepoints."""
    with CaptureQueriesContext(connection) as ctx:
        fn()
    return len([q for q in ctx.captured_queries if not q["sql"].startswith(skip)])


@pytest.mark.parametrize("principal", ["a_sub", "t_sub", "admin"])
def test_job_list_queries_do_not_grow_with_jobs(teams, principal):
    client = teams.clients[principal]
    client.get("/api/v1/jobs/")  # a token records its first use once a minute: not what is measured here
    few = count_queries(lambda: client.get("/api/v1/jobs/"))
    for i in range(20):
        job_service.submit(teams.a_sub, builders.submit_body(teams.llm, teams.a_train, teams.local, name=f"n-{i}",
                                                             namespace="team-a"))
    many = count_queries(lambda: client.get("/api/v1/jobs/"))
    assert many == few
    assert len(client.get("/api/v1/jobs/?limit=100").data["results"]) == 21 + (principal == "admin")


def test_bulk_submit_checks_permissions_once_for_the_whole_batch(teams):
    def bulk(n, prefix):
        body = {"jobs": [builders.submit_body(teams.llm, teams.a_train, teams.local, name=f"{prefix}-{i}",
                                              namespace="team-a") for i in range(n)]}
        return lambda: teams.clients["t_sub"].post("/api/v1/jobs/bulk/", body, format="json")

    bulk(1, "warm")()
    assert count_queries(bulk(2, "small")) == count_queries(bulk(200, "large"))


@pytest.mark.parametrize("principal,queries", [("admin", 7), ("a_sub", 8), ("t_sub", 9)])
def test_a_single_submit_reads_the_queue_tree_once_whoever_submits(teams, principal, queries):
    """Visibility of the names in the body and permission to submit share one read of the grants and of the queue
    tree (access.cached()). A submitter pays the admin's 7 statements (2 lookups, savepoint, 3 INSERTs, release)
    plus 1: their platform-admin group membership, queue grants and cluster grants (their own and their groups'),
    the queue tree and its cluster links, all in one statement (services/access/facts.py). Their token: its own
    lookup, and its queue scope in that same statement."""
    client = teams.clients[principal]

    def submit(name):
        body = builders.submit_body(teams.llm, teams.a_train, teams.local, name=name, namespace="team-a")
        return lambda: client.post("/api/v1/jobs/", body, format="json")

    submit("warm")()
    assert count_queries(submit("measured"), skip=()) == queries
