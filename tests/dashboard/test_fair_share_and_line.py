"""The queue page shows the fair share next to quota and limit, with its sentence, and the wait order; the job
page shows a pending job's place in line: the same numbers as the API."""
import pytest

from scheduling.choices import GangPhase
from tests import builders

pytestmark = pytest.mark.django_db


def test_queue_page_and_job_page_show_share_sentence_and_places(ui, admin_user):
    cluster = builders.make_cluster("local", capacity={"nodes": 1, "allocatable": {
        "nvidia.com/gpu": 18, "cpu": 64, "memory": 10**12}})
    research = builders.make_queue("research", clusters=[cluster], gpu_quota=18)
    team_a = builders.make_queue("team-a", parent=research, clusters=[cluster], gpu_quota=8, gpu_over_quota_weight=2)
    team_b = builders.make_queue("team-b", parent=research, clusters=[cluster], gpu_over_quota_weight=3)
    template = builders.make_template("gpu", pod_sets=[builders.pod_set(containers=[builders.container(gpu=1)])])
    for i in range(6):
        builders.make_job(template, team_a, cluster, name=f"run-{i}", user=admin_user, phase=GangPhase.RUNNING)
    waiting = [builders.make_job(template, team_a, cluster, name=f"wait-{i}", user=admin_user) for i in range(4)]
    for i in range(10):
        builders.make_job(template, team_b, cluster, name=f"b-{i}", user=admin_user)

    page = ui.get("/queues/team-a/").content.decode()
    assert ("team-a holds 12 GPUs: its 8 of quota plus 4 of the 10 idle GPUs, by weight 2 of 5; it gives back 4 if "
            "team-b asks.") in page
    assert '<td class="fair">12</td>' in page
    assert "1 of 4 in team-a" in page and "4 of 4 in team-a" in page and "4 of 14 in research" in page
    assert "wait-3" in page and "run-0" not in page.split('id="h-line"')[1].split("</section>")[0]

    job_page = ui.get(f"/jobs/{waiting[2].pk}/").content.decode()
    assert "Place in line: <strong>3 of 4 in team-a</strong>, 3 of 14 in research" in job_page
    assert 'id="job-position"' not in ui.get("/jobs/{}/".format(
        team_a.jobs.get(name="run-0").pk)).content.decode()
