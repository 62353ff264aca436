"""What the dashboard pages show and do, checked on the numbers and rows a user would look at."""
from datetime import timedelta

import pytest
from django.utils import timezone

from scheduling.choices import DesiredState, GangPhase
from scheduling.models import Cluster, GangJob, RuntimeTemplate
from tests import builders


@pytest.fixture
def world(setup, admin_user):
    template, queue, cluster = setup
    other = builders.make_queue("team-b", clusters=[cluster])
    jobs = {}
    for name, q, phase in (("a-run", queue, GangPhase.RUNNING), ("b-queued", queue, GangPhase.QUEUED),
                           ("c-failed", other, GangPhase.FAILED), ("d-queued", other, GangPhase.QUEUED)):
        jobs[name] = builders.make_job(template, q, cluster, name=name, phase=phase, user=admin_user)
    return jobs


def names_in(response) -> list[str]:
    return [j.name for j in response.context["page"].object_list]


@pytest.mark.parametrize("query, expected", [
    ("", ["d-queued", "c-failed", "b-queued", "a-run"]),
    ("?phase=Queued", ["d-queued", "b-queued"]),
    ("?queue=team-b", ["d-queued", "c-failed"]),
    ("?queue=team-b&phase=Queued", ["d-queued"]),
    ("?q=run", ["a-run"]),
    ("?submitter=nobody", []),
    ("?sort=name", ["a-run", "b-queued", "c-failed", "d-queued"]),
    ("?sort=-name", ["d-queued", "c-failed", "b-queued", "a-run"]),
])
def test_jobs_list_filters_search_and_sorts_like_the_api(ui, world, query, expected):
    response = ui.get(f"/jobs/{query}")
    assert names_in(response) == expected
    if "sort" not in query:  # the same FilterSet answers the API with the same rows
        assert sorted(j["name"] for j in ui.get(f"/api/v1/jobs/{query}").json()["results"]) == sorted(expected)


def test_jobs_list_paginates_50_a_page(ui, setup, admin_user):
    template, queue, cluster = setup
    from scheduling.services.jobs import lifecycle as job_service
    job_service.submit_many(admin_user, [builders.submit_body(template, queue, cluster, name=f"bulk-{i:03d}")
                                         for i in range(120)])
    pages, url = [], "/jobs/?sort=name"
    while url:  # Next, as a reader clicks it: keyset pages (db/keyset.py), no page numbers
        response = ui.get(url)
        pages.append(names_in(response))
        url = response.context["page"].next and "/jobs/?" + response.context["page"].next
    assert [len(p) for p in pages] == [50, 50, 20]
    assert pages[0][0] == "bulk-000" and pages[2][-1] == "bulk-119"
    assert sorted(sum(pages, [])) == [f"bulk-{i:03d}" for i in range(120)]  # no row twice, none left out
    last = ui.get("/jobs/?" + ui.get("/jobs/?sort=name").context["page"].last).context["page"]
    assert [j.name for j in last.object_list] == [f"bulk-{i:03d}" for i in range(70, 120)]
    assert (last.next, bool(last.previous), bool(last.first)) == ("", True, True)
    back = ui.get("/jobs/?" + last.previous).context["page"]
    assert [j.name for j in back.object_list] == [f"bulk-{i:03d}" for i in range(20, 70)]


def test_overview_lists_jobs_queued_longer_than_the_threshold_as_stuck(ui, world, settings):
    settings.GANGWEB_STUCK_AFTER_SECONDS = 600
    GangJob.objects.filter(name="b-queued").update(phase_changed_at=timezone.now() - timedelta(seconds=601),
                                                   phase_reason="Unschedulable")
    context = ui.get("/").context
    assert [j.name for j in context["stuck"]] == ["b-queued"]
    assert [j.name for j in context["failures"]] == ["c-failed"]
    assert {p["phase"]: p["n"] for p in context["phases"]}["Queued"] == 2


def test_cancel_then_resubmit_from_the_job_page(ui, world, enqueued):
    job = world["b-queued"]
    response = ui.post(f"/jobs/{job.pk}/cancel/", follow=True)
    job.refresh_from_db()
    assert job.desired_state == DesiredState.CANCEL
    assert "Cancellation requested" in response.content.decode()
    # A job that is still active cannot be resubmitted: the service's message is shown, nothing is created.
    response = ui.post(f"/jobs/{job.pk}/resubmit/", follow=True)
    assert "cancel it or wait for it to finish before resubmitting" in response.content.decode()
    failed = world["c-failed"]
    response = ui.post(f"/jobs/{failed.pk}/resubmit/")
    new = GangJob.objects.get(resubmitted_from=failed)
    assert response.url == f"/jobs/{new.pk}/" and new.phase == GangPhase.SUBMITTED


def test_editing_a_template_stores_a_new_version_and_an_unchanged_spec_does_not(ui, setup):
    template = setup[0].template
    page = ui.get(f"/templates/{template.name}/edit/")
    spec_yaml = page.context["form"].initial["spec"]
    ui.post(f"/templates/{template.name}/edit/", {"description": "", "spec": spec_yaml})
    assert template.versions.count() == 1
    ui.post(f"/templates/{template.name}/edit/", {"description": "", "spec": spec_yaml.replace("replicas: 2",
                                                                                              "replicas: 3")})
    assert list(template.versions.order_by("version").values_list("version", flat=True)) == [1, 2]


def test_template_form_shows_the_service_message_on_the_spec_field(ui, db):
    spec = ("backend: k8s-workload\npodSets:\n"
            "- {name: w, replicas: 0, template: {spec: {containers: [{name: m, image: i}]}}}")
    response = ui.post("/templates/new/", {"name": "bad", "spec": spec})
    assert response.context["form"].errors == {"spec": ["podSets[0].replicas: must be at least 1, got 0"]}
    assert not RuntimeTemplate.objects.filter(name="bad").exists()


def test_cluster_registration_needs_a_kubeconfig_and_never_shows_it(ui, db):
    response = ui.post("/clusters/new/", {"name": "east"})
    assert response.context["form"].errors == {"kubeconfig_file": ["upload a kubeconfig, paste one, or choose "
                                                                   "in-cluster"]}
    ui.post("/clusters/new/", {"name": "east", "kubeconfig": builders.kubeconfig(comment="# secret-token-xyz\n")})
    assert Cluster.objects.filter(name="east").exists()
    assert "secret-token-xyz" not in ui.get("/clusters/east/").content.decode()


def test_read_only_pages_work_without_javascript(ui, world):
    """The full page carries the data; htmx only refreshes it. No page depends on a fragment to show rows."""
    html = ui.get("/jobs/").content.decode()
    assert all(name in html for name in world)
    job = world["a-run"]
    assert "Running" in ui.get(f"/jobs/{job.pk}/").content.decode()
    assert f'href="/jobs/{job.pk}/events/"' in ui.get(f"/jobs/{job.pk}/").content.decode()
