"""A cluster's scheduler names (`Cluster.scheduler_names`): defaults kai-scheduler, scheduler-plugins-scheduler and
volcano; shown and changed through the API and the cluster page by whoever may change the cluster, validated (400
naming the field, nothing saved), and carried by the pods gangweb builds for that cluster."""
import pytest

from scheduling.backends.kai_v2alpha2 import KaiV2alpha2
from scheduling.models import AuditEvent, Cluster, GangJob
from scheduling.reconcile import desired
from tests import builders

pytestmark = pytest.mark.django_db

DEFAULTS = {"kai": "kai-scheduler", "coscheduling": "scheduler-plugins-scheduler", "volcano": "volcano"}


def test_a_new_cluster_has_the_default_scheduler_names(api):
    created = api.post("/api/v1/clusters/", {"name": "east", "in_cluster": False}, format="json")
    assert created.status_code == 201, created.data
    assert created.data["scheduler_names"] == DEFAULTS
    assert Cluster.objects.get(name="east").scheduler_name_for("k8s-workload") == ""  # the default scheduler


def test_a_cluster_admin_renames_kais_scheduler_and_an_empty_name_restores_the_default(api, client):
    cluster = builders.make_cluster("east")
    admin = builders.make_user("ops")
    builders.grant(cluster, "admin", user=admin)
    api.force_authenticate(admin)
    changed = api.patch("/api/v1/clusters/east/", {"scheduler_names": {"kai": "kai-scheduler-gpu"}}, format="json")
    assert changed.status_code == 200, changed.data
    assert changed.data["scheduler_names"] == {**DEFAULTS, "kai": "kai-scheduler-gpu"}
    assert AuditEvent.objects.filter(action="cluster.update").exists()
    back = api.patch("/api/v1/clusters/east/", {"scheduler_names": {"kai": "", "volcano": "vc"}}, format="json")
    assert back.data["scheduler_names"] == {**DEFAULTS, "volcano": "vc"}


@pytest.mark.parametrize("names, field, words", [
    ({"kai": "Kai Scheduler"}, "scheduler_names.kai", "is not a DNS-1123 subdomain"),
    ({"kai": "a" * 254}, "scheduler_names.kai", "is not a DNS-1123 subdomain"),
    ({"kai": 7}, "scheduler_names.kai", "is not a DNS-1123 subdomain"),
    ({"slurm": "slurmd"}, "scheduler_names.slurm", "is not a backend that names a scheduler"),
    ({"k8s-workload": "my-scheduler"}, "scheduler_names.k8s-workload", "is not a backend that names a scheduler"),
    (["kai-scheduler"], "scheduler_names", "must be an object"),
])
def test_a_bad_scheduler_name_is_a_400_naming_the_field_and_nothing_changes(api, names, field, words):
    builders.make_cluster("east")
    refused = api.patch("/api/v1/clusters/east/", {"scheduler_names": names}, format="json")
    assert refused.status_code == 400
    assert field in refused.data and words in str(refused.data[field])
    assert Cluster.objects.get(name="east").scheduler_names == DEFAULTS


def test_someone_who_may_only_see_the_cluster_cannot_rename_its_schedulers(api, client):
    cluster = builders.make_cluster("east")
    viewer = builders.make_user("viewer")
    builders.grant(cluster, "viewer", user=viewer)
    api.force_authenticate(viewer)
    assert api.patch("/api/v1/clusters/east/", {"scheduler_names": {"kai": "x"}}, format="json").status_code == 403
    client.force_login(viewer)
    page = client.get("/clusters/east/")
    assert page.status_code == 200 and page.context["scheduler_form"] is None
    assert client.post("/clusters/east/schedulers/", {"kai": "x"}).status_code == 403
    assert Cluster.objects.get(name="east").scheduler_names == DEFAULTS


def test_the_cluster_page_shows_and_changes_the_names(client, admin_user):
    builders.make_cluster("east")
    client.force_login(admin_user)
    page = client.get("/clusters/east/")
    rows = {r["family"]: r["scheduler_name"] for r in page.context["backends"]}
    assert rows["kai"] == "kai-scheduler" and rows["k8s-workload"] == ""
    assert b"Scheduler names" in page.content
    bad = client.post("/clusters/east/schedulers/", {"kai": "Not Valid", "coscheduling": "", "volcano": "volcano"})
    assert bad.status_code == 400 and "is not a DNS-1123 subdomain" in str(bad.context["scheduler_form"].errors["kai"])
    assert Cluster.objects.get(name="east").scheduler_names == DEFAULTS
    ok = client.post("/clusters/east/schedulers/", {"kai": "kai-gpu", "coscheduling": "gang-profile",
                                                     "volcano": ""})
    assert ok.status_code == 302
    assert Cluster.objects.get(name="east").scheduler_names == {**DEFAULTS, "kai": "kai-gpu",
                                                                "coscheduling": "gang-profile"}
    assert b"kai-gpu" in client.get("/clusters/east/").content


def test_the_pods_of_a_job_carry_their_clusters_scheduler_name(setup, admin_user):
    template, queue, cluster = setup
    kai = builders.make_template("kai-llm", backend="kai")
    Cluster.objects.filter(pk=cluster.pk).update(scheduler_names={**DEFAULTS, "kai": "kai-scheduler-gpu"})
    job = builders.make_job(kai, queue, cluster, name="train", user=admin_user)
    job = GangJob.objects.select_related("cluster", "queue").get(pk=job.pk)
    backend = KaiV2alpha2()
    spec = desired.gang_spec(job)
    [owner, *_] = desired.owners(backend, spec)
    assert owner["spec"]["template"]["spec"]["schedulerName"] == "kai-scheduler-gpu"
    other = builders.make_cluster("west")
    job.cluster = other
    [owner, *_] = desired.owners(backend, desired.gang_spec(job))
    assert owner["spec"]["template"]["spec"]["schedulerName"] == "kai-scheduler"
