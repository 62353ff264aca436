"""Submitting without a cluster (or with several): gangweb places the job by the rule of docs/queues.md, "Where a job
runs", says why on the timeline and in `placement`, and refuses with the reason when it cannot."""
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from scheduling.models import GangJob, PhaseTransition
from tests import builders

pytestmark = pytest.mark.django_db
GIB = 2**30


known_cluster = builders.make_known_cluster


@pytest.fixture
def two(db):
    """c1 (8 GPUs) and c2 (16 GPUs), a queue over both, a template asking 2 pods x 2 GPUs (4 GPUs)."""
    c1, c2 = known_cluster("c1", 8), known_cluster("c2", 16)
    queue = builders.make_queue("team-a", clusters=[c1, c2])
    template = builders.make_template("gpu4", pod_sets=[builders.pod_set(replicas=2, containers=[
        builders.container(gpu="2")])])
    return template, queue, c1, c2


def body(template, queue, name, **extra):
    out = {"name": name, "namespace": "default", "template": template.template.name, "queue": queue.name}
    out.update(extra)
    return out


def test_a_job_without_a_cluster_goes_where_it_fits_and_says_why(api, two, admin_user):
    template, queue, c1, c2 = two
    # c2: 2 GPUs free
    builders.make_job(template, queue, c2, name="big", phase="Running", requested_gpu=14, user=admin_user)
    r = api.post("/api/v1/jobs/", body(template, queue, "train-1"), format="json")
    assert r.status_code == 201, r.data
    job = GangJob.objects.get(name="train-1")
    assert job.cluster == c1
    text = "placed on c1: 8 GPUs free; c2 has 2 GPUs free"
    assert job.placement["text"] == text and job.placement["rule"] == "fits"
    entry = PhaseTransition.objects.get(job=job)
    assert (entry.source, entry.reason, entry.message) == ("gangweb", "Placed", f"by admin; {text}")
    detail = api.get(f"/api/v1/jobs/{job.id}/").data
    assert detail["cluster"] == "c1"
    assert detail["placement"]["clusters"][1]["free"]["gpu"] == 2


def test_a_waiting_job_that_can_never_fit_its_cluster_takes_no_room_there(api, two, admin_user):
    template, queue, c1, c2 = two
    # c2 has 16 GPUs: a 40-GPU job waiting there never takes any of them; a 14-GPU one waiting will.
    builders.make_job(template, queue, c2, name="huge", phase="Queued", requested_gpu=40, user=admin_user)
    builders.make_job(template, queue, c1, name="waits", phase="Queued", requested_gpu=6, user=admin_user)
    r = api.post("/api/v1/jobs/", body(template, queue, "train-2"), format="json")
    assert r.status_code == 201, r.data
    job = GangJob.objects.get(name="train-2")
    assert job.cluster == c2
    assert job.placement["text"] == "placed on c2: 16 GPUs free; c1 has 2 GPUs free"
    assert {c["cluster"]: c["free"]["gpu"] for c in job.placement["clusters"]} == {"c1": 2, "c2": 16}


def test_free_room_is_never_below_zero_in_the_numbers(api, two, admin_user):
    template, queue, c1, c2 = two
    for cluster, name in ((c1, "a"), (c2, "b")):  # more waiting than each has, each job fitting alone
        for i in range(3):
            builders.make_job(template, queue, cluster, name=f"{name}-{i}", phase="Queued", requested_gpu=8,
                              user=admin_user)
    r = api.post("/api/v1/jobs/", body(template, queue, "train-3"), format="json")
    assert r.status_code == 201, r.data
    frees = [c["free"]["gpu"] for c in GangJob.objects.get(name="train-3").placement["clusters"]]
    assert frees == [0, 0]


def test_a_list_of_clusters_is_chosen_among_and_a_named_cluster_is_respected(api, two):
    template, queue, c1, c2 = two
    r = api.post("/api/v1/jobs/", body(template, queue, "only-c1", cluster=["c1"]), format="json")
    assert r.status_code == 201, r.data
    assert GangJob.objects.get(name="only-c1").cluster == c1
    r = api.post("/api/v1/jobs/", body(template, queue, "named", cluster="c1"), format="json")
    named = GangJob.objects.get(name="named")
    assert (named.cluster, named.placement) == (c1, None)
    assert PhaseTransition.objects.get(job=named).reason == "Submitted"
    assert api.get(f"/api/v1/jobs/{named.id}/").data["placement"] is None


@pytest.mark.parametrize(("value", "message"), [
    ([], "must be a cluster name, a non-empty list of cluster names, or left out (gangweb chooses)"),
    (["c1", "c1"], "names a cluster twice"),
    (["nope"], "no cluster named 'nope'"),
    (7, "must be a cluster name, a non-empty list of cluster names, or left out (gangweb chooses)"),
])
def test_a_bad_cluster_list_is_a_400_naming_the_field(api, two, value, message):
    template, queue, _c1, _c2 = two
    r = api.post("/api/v1/jobs/", body(template, queue, "bad", cluster=value), format="json")
    assert r.status_code == 400
    assert r.data["cluster"] == [message]
    assert not GangJob.objects.exists()


def test_an_unreachable_cluster_is_not_chosen_and_none_known_is_a_503_naming_why(api, two):
    template, queue, c1, c2 = two
    since = timezone.now() - timedelta(minutes=3)
    c2.health, c2.unreachable_since = "Unreachable", since
    c2.save()
    r = api.post("/api/v1/jobs/", body(template, queue, "a"), format="json")
    assert r.status_code == 201
    assert GangJob.objects.get(name="a").cluster == c1
    assert f"c2 not considered: unreachable since {since:%H:%M:%S} UTC" in r.data["timeline"][0]["message"]
    c1.last_probe_at = timezone.now() - timedelta(minutes=10)
    c1.save()
    r = api.post("/api/v1/jobs/", body(template, queue, "b"), format="json")
    assert r.status_code == 503
    assert r["Retry-After"] == "30"
    assert "c1: its numbers are stale (last probed 600 s ago)" in r.data["cluster"][0]
    assert not GangJob.objects.filter(name="b").exists()


def test_clusters_that_cannot_run_the_backend_or_the_gang_are_left_out_with_the_reason(api, two):
    template, queue, c1, c2 = two
    c2.available_backends = ["volcano-v1beta1"]
    c2.save()
    r = api.post("/api/v1/jobs/", body(template, queue, "x"), format="json")
    assert GangJob.objects.get(name="x").cluster == c1
    c1.available_backends = ["kai-v2alpha2"]
    c1.save()
    r = api.post("/api/v1/jobs/", body(template, queue, "y"), format="json")
    assert r.status_code == 400
    assert r.data["cluster"] == ["no cluster to place the job on: c1 does not run backend 'k8s-workload'; c2 does "
                                 "not run backend 'k8s-workload'"]
    c1.available_backends = c2.available_backends = ["k8s-workload-v1beta1"]
    c1.save()
    c2.save()
    huge = {"podSets": {"worker": {"replicas": 20}}}  # 40 GPUs
    r = api.post("/api/v1/jobs/", body(template, queue, "z", overrides=huge), format="json")
    assert r.status_code == 400
    assert "c2 has 16 GPUs of the 40 GPUs it asks" in r.data["cluster"][0]


def test_a_queue_places_only_on_the_clusters_it_takes_jobs_on(api, two, admin_user):
    template, _queue, c1, c2 = two
    only_c2 = builders.make_queue("only-c2", clusters=[c2])
    builders.make_job(template, only_c2, c2, name="full", phase="Running", requested_gpu=16, user=admin_user)
    r = api.post("/api/v1/jobs/", body(template, only_c2, "w"), format="json")
    assert r.status_code == 201
    assert GangJob.objects.get(name="w").cluster == c2


def bulk_placed(api, template, queue, n, prefix):
    r = api.post("/api/v1/jobs/bulk/", {"jobs": [body(template, queue, f"{prefix}-{i}") for i in range(n)]},
                 format="json")
    assert r.status_code == 201, r.data
    return GangJob.objects.filter(name__startswith=f"{prefix}-")


def test_a_bulk_spreads_without_overfilling_a_cluster_while_another_has_room(api, two):
    template, queue, c1, c2 = two
    jobs = bulk_placed(api, template, queue, 12, "b")  # 48 GPUs over 8 + 16
    per = {c.name: jobs.filter(cluster=c).count() for c in (c1, c2)}
    assert per == {"c1": 4, "c2": 8}  # 2 + 4 fit at once, the next 6 wait 1:2 like the sizes
    first_six = sorted(jobs.order_by("id")[:6], key=lambda j: j.id)
    assert sorted(j.placement["rule"] for j in first_six) == ["fits"] * 6


def test_a_bulk_reads_the_same_for_10_and_60_placed_jobs(api, two):
    """Placement reads every cluster, the queues' cluster links and one GROUP BY of the jobs, once per request (the
    INSERTs are the database's batches, as for any bulk)."""
    template, queue, _c1, _c2 = two
    bulk_placed(api, template, queue, 1, "warm")  # the template spec cache
    reads = []
    for n, prefix in ((10, "q"), (60, "r")):
        with CaptureQueriesContext(connection) as ctx:
            bulk_placed(api, template, queue, n, prefix)
        reads.append([q["sql"].split(" ", 1)[0] for q in ctx.captured_queries if q["sql"].startswith("SELECT")])
    # PostgreSQL: one more, the new jobs' ids before their COPY (db/copy_rows.py)
    assert reads[0] == reads[1] and len(reads[0]) == 5 + (connection.vendor == "postgresql")


def test_the_dashboard_form_left_on_gangweb_chooses_places_the_job(two, admin_user):
    from scheduling.forms.jobs import SubmitForm

    template, queue, c1, c2 = two
    form = SubmitForm(data={"template": "gpu4", "name": "from-form", "namespace": "default", "queue": "team-a",
                            "cluster": ""}, templates=["gpu4"], queues=["team-a"], clusters=["c1", "c2"])
    assert form.is_valid(), form.errors
    job = form.submit(admin_user)
    assert job is not None, form.errors
    assert job.cluster == c1  # both fit, neither is used: the name decides
    assert job.placement["text"] == "placed on c1: 8 GPUs free; c2 has 16 GPUs free"


def test_a_queues_move_setting_is_set_checked_and_cleared_through_the_api(api, two):
    _template, queue, _c1, _c2 = two
    r = api.patch(f"/api/v1/queues/{queue.name}/", {"move_after_seconds": 10}, format="json")
    assert r.status_code == 400 and "move_after_seconds" in r.data
    r = api.patch(f"/api/v1/queues/{queue.name}/", {"move_after_seconds": 300}, format="json")
    assert r.status_code == 200, r.data
    assert r.data["move_after_seconds"] == 300
    queue.refresh_from_db()
    assert queue.move_after_seconds == 300
    r = api.patch(f"/api/v1/queues/{queue.name}/", {"move_after_seconds": None}, format="json")
    assert r.status_code == 200 and r.data["move_after_seconds"] is None


def test_a_refusal_names_no_cluster_the_submitter_cannot_see(db, enqueued, queue_syncs):
    """The submitter's queue takes jobs on `mine` only, which does not run the template's backend; the clusters of
    another team's queue stay unnamed in the 400 (before, it said "queue 'pinned' does not take jobs on
    secret-gpu-farm"), as a submit naming one of them answers "no cluster named ..."."""
    from rest_framework.test import APIClient

    mine = known_cluster("mine", 8, available_backends=["kai-v2"])
    secret = known_cluster("secret-gpu-farm", 64)
    builders.make_queue("hidden-q", clusters=[secret])
    pinned = builders.make_queue("pinned", clusters=[mine])
    template = builders.make_template("gpu4", pod_sets=[builders.pod_set(replicas=2, containers=[
        builders.container(gpu="2")])])
    user = builders.make_user("pin")
    builders.grant(pinned, "submitter", user=user)
    client = APIClient()
    client.force_authenticate(user)
    r = client.post("/api/v1/jobs/", body(template, pinned, "j"), format="json")
    assert r.status_code == 400
    assert r.data == {"cluster": ["no cluster to place the job on: mine does not run backend 'k8s-workload'"]}
    r = client.post("/api/v1/jobs/", body(template, pinned, "j", cluster=["mine", "secret-gpu-farm"]), format="json")
    assert r.data == {"cluster": ["no cluster named 'secret-gpu-farm'"]}
    assert GangJob.objects.count() == 0


def test_a_bulk_counts_its_named_jobs_before_placing_the_others(api, two):
    """Jobs of a bulk that name c1 fill it (2 x 4 of its 8 GPUs) before the request places any job: the placed jobs
    after them see c1 full and go to c2 (before, the named jobs were counted only once a placement had loaded the
    numbers, so the first placed job read "placed on c1: 8 GPUs free" and c1 got 12 GPUs of jobs)."""
    template, queue, c1, c2 = two
    jobs = [body(template, queue, "named-1", cluster="c1"), body(template, queue, "named-2", cluster="c1"),
            body(template, queue, "placed-1"), body(template, queue, "placed-2", cluster=["c1", "c2"])]
    r = api.post("/api/v1/jobs/bulk/", {"jobs": jobs}, format="json")
    assert r.status_code == 201, r.data
    where = dict(GangJob.objects.values_list("name", "cluster__name"))
    assert where == {"named-1": "c1", "named-2": "c1", "placed-1": "c2", "placed-2": "c2"}
    assert GangJob.objects.get(name="placed-1").placement["text"] == "placed on c2: 16 GPUs free; c1 has 0 GPUs free"


def test_a_cluster_whose_nodes_are_all_smaller_than_a_pod_is_not_chosen(api, db, enqueued, queue_syncs):
    """c1 has 8 GPUs in all on nodes of 1 GPU each; c2 one node of 4 GPUs. A gang of 2 pods x 2 GPUs can never be
    bound on c1: it goes to c2 (before: "placed on c1: 8 GPUs free", where it would wait for ever), and a gang
    only c1 could take in total is a 400 naming the node size."""
    small = known_cluster("c1", 8)
    small.capacity = {**small.capacity, "nodes": 8, "largest": {"nvidia.com/gpu": 1, "cpu": 8, "memory": 64 * GIB}}
    small.save()
    big = known_cluster("c2", 4)
    big.capacity = {**big.capacity, "nodes": 1, "largest": dict(big.capacity["allocatable"])}
    big.save()
    queue = builders.make_queue("team-a", clusters=[small, big])
    template = builders.make_template("gpu4", pod_sets=[builders.pod_set(replicas=2, containers=[
        builders.container(gpu="2")])])
    r = api.post("/api/v1/jobs/", body(template, queue, "j1"), format="json")
    assert r.status_code == 201, r.data
    job = GangJob.objects.get(name="j1")
    assert job.cluster == big
    assert job.placement["text"] == "placed on c2: 4 GPUs free; c1 is too small for it"
    r = api.post("/api/v1/jobs/", body(template, queue, "j2", cluster=["c1"]), format="json")
    assert r.status_code == 400
    assert r.data == {"cluster": ["no cluster to place the job on: it asks more than any candidate cluster has in "
                                  "all or on one node: c1's largest node has 1 GPU, a pod asks 2 GPUs"]}
