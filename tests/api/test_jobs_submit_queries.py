"""Submit query budgets: a single submit and a bulk submit of any size each run a fixed number of SQL queries,
and the constraint-first name check still names the clashing job."""
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from scheduling.db import clock
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
    # 2 lookups (template versions without their specs, which the warm-up cached; the queue with its parents,
    # has-children, cluster links and the cluster), savepoint, job INSERT, transition INSERT, audit INSERT,
    # release. No queue usage: no queue in the chain has a finite limit.
    assert count == 7
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
    assert count == 7  # parents come with the queue lookup
    assert response.data["queue"] == "dept-team"

    deep = team
    for level in range(4):  # 5 levels below dept: the ones past select_related's 3 cost a query per level
        deep = builders.make_queue(f"deep-{level}", parent=deep, clusters=[cluster])
    count, _ = _count(api, "/api/v1/jobs/", builders.submit_body(template, deep, cluster))
    assert count == 9


# Sizes stay under SQLite's 999 parameters per statement (Django splits larger INSERTs there; PostgreSQL does not):
# 24 jobs x 40 columns (30 x 35 was over since the dispatch claim's two columns, migration 0020; 25 x 40 since
# placement's three, migration 0026).
@pytest.mark.parametrize("size", [1, 10, 24])
def test_a_bulk_submit_runs_the_same_queries_whatever_its_size(api, setup, size):
    bodies = [builders.submit_body(*setup) for _ in range(size)]
    clock.offset()  # measured once per process (scheduling/db/clock.py), then kept: not a cost of each submit
    count, response = _count(api, "/api/v1/jobs/bulk/", {"jobs": bodies})
    # The single-submit budget plus one: this template version's spec is not in the process cache yet (the
    # cluster's view for the submit warnings comes with the queue statement). On PostgreSQL the rows go by COPY
    # (db/copy_rows.py), which needs the job ids first: one more statement.
    assert count == 8 + (connection.vendor == "postgresql")
    assert response.data["count"] == size
    assert [j["name"] for j in response.data["jobs"]] == [b["name"] for b in bodies]
    assert GangJob.objects.count() == PhaseTransition.objects.count() == size


@pytest.mark.parametrize("backend", ["kai", "volcano"])
def test_a_submit_whose_queue_object_is_out_of_sync_costs_no_query_more_and_still_warns(api, setup, backend):
    """The queue objects' sync problems and the cluster's view ride on the queue statement (services/jobs/lookups.py):
    a kai or volcano submit costs what a k8s-workload one does, warnings included."""
    from scheduling.choices import SyncState
    from scheduling.models import QueueClusterState

    _, queue, cluster = setup
    template = builders.make_template(f"{backend}-tmpl", backend=backend)
    QueueClusterState.objects.create(policy=queue, cluster=cluster, family=backend, state=SyncState.ERROR,
                                     message="403 Forbidden: denied")
    api.post("/api/v1/jobs/", builders.submit_body(template, queue, cluster), format="json")  # warm-up: the spec
    count, response = _count(api, "/api/v1/jobs/", builders.submit_body(template, queue, cluster))
    assert count == 7  # as test_a_single_submit_reads_lookups_once_and_does_not_read_the_new_job_back
    [warning] = [w for w in response.data["warnings"] if w["code"] == "queue_not_in_sync"]
    assert (warning["queue"], warning["cluster"], warning["state"]) == ("team-a", "local", SyncState.ERROR)
    assert warning["message"].startswith("queue 'team-a' is not in sync in cluster local: its ")
    assert "is Error: 403 Forbidden: denied." in warning["message"]


def test_a_bulk_submit_that_reuses_an_active_name_is_409_naming_it_and_creates_nothing(api, setup):
    taken = builders.submit_body(*setup, name="taken")
    assert api.post("/api/v1/jobs/", taken, format="json").status_code == 201
    r = api.post("/api/v1/jobs/bulk/", {"jobs": [builders.submit_body(*setup, name="fresh"), dict(taken)]},
                 format="json")
    assert r.status_code == 409
    assert "an active job 'taken' already exists in namespace 'default'" in str(r.data)
    assert list(GangJob.objects.values_list("name", flat=True)) == ["taken"]


def test_a_finite_limit_on_an_ancestor_adds_one_query_for_usage_and_is_still_enforced(api, setup):
    template, _, cluster = setup
    dept = builders.make_queue("dept", clusters=[cluster], cpu_limit=2500)
    team = builders.make_queue("dept-team", parent=dept, clusters=[cluster])
    api.post("/api/v1/jobs/", builders.submit_body(template, team, cluster), format="json")  # warm-up: 2 CPUs
    count, _ = _count(api, "/api/v1/jobs/", builders.submit_body(template, team, cluster))
    assert count == 8
    too_big = builders.submit_body(template, team, cluster, overrides={"podSets": {"worker": {"replicas": 3}}})
    r = api.post("/api/v1/jobs/", too_big, format="json")
    assert r.status_code == 400
    assert "ancestor queue 'dept' has cpu_limit 2500 millicores" in r.data["queue"][0]


def test_a_bulk_over_many_clusters_costs_two_more_queries_and_checks_each_cluster(api, setup):
    template, queue, _ = setup
    clusters = [builders.make_cluster(f"c{i}") for i in range(9)]
    queue.clusters.set(clusters[:8])
    bodies = [builders.submit_body(template, queue, c) for c in clusters[:8]]
    clock.offset()  # measured once per process (scheduling/db/clock.py), then kept: not a cost of each submit
    count, response = _count(api, "/api/v1/jobs/bulk/", {"jobs": bodies})
    # eight clusters, with their views for the submit warnings, still ride on the queue query (+1: the spec is read
    # into the cache; +1 on PostgreSQL: ids)
    assert count == 8 + (connection.vendor == "postgresql")
    assert [j["cluster"] for j in response.data["jobs"]] == [f"c{i}" for i in range(8)]

    bodies = [builders.submit_body(template, queue, c) for c in clusters[:8]]
    with CaptureQueriesContext(connection) as queries:
        r = api.post("/api/v1/jobs/bulk/", {"jobs": [*bodies, builders.submit_body(template, queue, clusters[8])]},
                     format="json")
    assert r.status_code == 400
    assert r.data == {"jobs[8].cluster": ["queue 'team-a' is not synced to cluster 'c8'"]}
    # versions, queues, clusters, links, and the submit-warning views (nine clusters: more than ride on the queue
    # statement; read once for all the request's clusters, before the refusal, c0..c7 from the cache); nothing
    # written
    assert len(queries) == 5
    assert GangJob.objects.count() == 8


def test_a_cached_template_spec_never_hides_a_new_version_or_a_changed_owner(api, setup, django_user_model):
    from scheduling.services.templates import versions as template_versions

    version, queue, cluster = setup
    assert api.post("/api/v1/jobs/", builders.submit_body(*setup), format="json").data["template_version"] == 1
    template_versions.add_version(None, version.template, builders.template_spec(
        pod_sets=[builders.pod_set(replicas=3)]))
    r = api.post("/api/v1/jobs/", builders.submit_body(*setup), format="json")
    assert r.data["template_version"] == 2
    assert r.data["resolved_spec"]["podSets"][0]["replicas"] == 3
    r = api.post("/api/v1/jobs/", builders.submit_body(*setup, template_version=1), format="json")
    assert r.data["template_version"] == 1
    assert r.data["resolved_spec"]["podSets"][0]["replicas"] == 2

    # The template's owner is read with every submit: moving it to a queue the submitter cannot see refuses them,
    # as a template that does not exist (services/access/roles.py).
    user = django_user_model.objects.create_user("sub", password="x")
    builders.grant(queue, "submitter", user=user)
    other = builders.make_queue("other")
    client = type(api)()
    client.force_authenticate(user)
    assert client.post("/api/v1/jobs/", builders.submit_body(*setup), format="json").status_code == 201
    version.template.queue = other
    version.template.save()
    r = client.post("/api/v1/jobs/", builders.submit_body(*setup), format="json")
    assert r.status_code == 400
    assert r.data["template"] == [f"no runtime template named '{version.template.name}'"]
