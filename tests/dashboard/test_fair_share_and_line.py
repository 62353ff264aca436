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
    assert '<td class="fair">12 GPUs</td>' in page
    assert "1 of 4 in team-a" in page and "4 of 4 in team-a" in page and "4 of 14 in research" in page
    assert "wait-3" in page and "run-0" not in page.split('id="h-line"')[1].split("</section>")[0]

    job_page = ui.get(f"/jobs/{waiting[2].pk}/").content.decode()
    assert "Place in line: <strong>3 of 4 in team-a</strong>, 3 of 14 in research" in job_page
    assert 'id="job-position"' not in ui.get("/jobs/{}/".format(
        team_a.jobs.get(name="run-0").pk)).content.decode()


def test_queue_pages_count_pending_running_and_recently_finished_jobs_and_draw_the_fair_share_bar(ui, admin_user):
    from datetime import timedelta

    from django.utils import timezone

    from scheduling.models import GangJob

    cluster = builders.make_cluster("local", capacity={"nodes": 1, "allocatable": {
        "nvidia.com/gpu": 18, "cpu": 64, "memory": 10**12}})
    research = builders.make_queue("research", clusters=[cluster], gpu_quota=18)
    team_a = builders.make_queue("team-a", parent=research, clusters=[cluster], gpu_quota=8, gpu_limit=16)
    team_b = builders.make_queue("team-b", parent=research, clusters=[cluster])
    template = builders.make_template("gpu", pod_sets=[builders.pod_set(containers=[builders.container(gpu=1)])])
    phases = {team_a: [GangPhase.QUEUED] * 3 + [GangPhase.SUBMITTED, GangPhase.RUNNING, GangPhase.SCHEDULED,
                                                GangPhase.SUCCEEDED, GangPhase.FAILED, GangPhase.CANCELLED],
              team_b: [GangPhase.QUEUED, GangPhase.RUNNING, GangPhase.SUCCEEDED]}
    for queue, wanted in phases.items():
        for i, phase in enumerate(wanted):
            builders.make_job(template, queue, cluster, name=f"{queue.name}-{i}", user=admin_user, phase=phase)
    # Finished two days ago: not in the last 24 hours.
    GangJob.objects.filter(name="team-a-8").update(phase_changed_at=timezone.now() - timedelta(days=2))

    def counts(html, name):
        head = html.split(f'id="queue-{name}"', 1)[1].split("</header>", 1)[0]
        return tuple(int(head.split(f'class="{k}"')[1].split(">", 1)[1].split(" ", 1)[0])
                     for k in ("pending", "running", "finished"))

    tree = ui.get("/queues/").content.decode()
    assert counts(tree, "research") == (5, 3, 3)  # its two children's jobs
    kids = ui.get("/queues/research/children/").content.decode()
    assert counts(kids, "team-a") == (4, 2, 2) and counts(kids, "team-b") == (1, 1, 1)
    page = ui.get("/queues/team-a/").content.decode()
    assert [page.split(f'id="count-{k}">')[1].split("<")[0] for k in ("pending", "running", "finished")] == [
        "4", "2", "2"]
    # The GPU bar marks quota 8, limit 16 and the fair share (12 with 4 jobs pending, 2 allocated: the division's).
    gpu_row = page.split('<tr data-resource="gpu">')[1].split("</tr>")[0]
    fair = gpu_row.split('<td class="fair">')[1].split(" GPU")[0]
    assert f'data-fair="{fair}"' in gpu_row and 'class="q-quota"' in gpu_row and 'data-limit="' in gpu_row
    assert f"fair share {fair} GPU" in gpu_row
    api = ui.get("/api/v1/queues/tree/").json()["roots"][0]
    assert api["counts"] == {"pending": 5, "running": 3, "finished_24h": 3}
    assert [c["counts"] for c in api["children"]] == [{"pending": 4, "running": 2, "finished_24h": 2},
                                                      {"pending": 1, "running": 1, "finished_24h": 1}]
    # Only one cluster's jobs with ?cluster=: none in another.
    builders.make_cluster("other")
    assert ui.get("/api/v1/queues/tree/?cluster=other").json()["roots"][0]["counts"] == {
        "pending": 0, "running": 0, "finished_24h": 0}


@pytest.mark.parametrize("backend, priority_class, words", [
    ("kai", "build", "(priority 100, then submit time)"),
    ("kai", "", "(priority 50, then submit time)"),
    ("volcano", "", "(by submit time)"),
    ("k8s-workload", "high", "(by submit time; PriorityClass high not counted)"),
])
def test_the_job_page_names_the_priority_a_job_waits_with_only_where_gangweb_knows_it(
        ui, admin_user, backend, priority_class, words):
    from scheduling.models import GangJob

    cluster = builders.make_cluster("local")
    queue = builders.make_queue("team-a", clusters=[cluster])
    template = builders.make_template("base", backend=backend)
    job = builders.make_job(template, queue, cluster, name="waits", user=admin_user)
    GangJob.objects.filter(pk=job.pk).update(priority_class_name=priority_class)
    line = ui.get(f"/jobs/{job.pk}/").content.decode().split('id="job-position"')[1].split("</p>")[0]
    assert words in line
    assert "None" not in line


def test_the_fair_share_table_writes_amounts_in_the_units_of_the_queue_tree(ui, admin_user):
    # 4Gi of memory is 4,295 MB (10^6 bytes) to KAI, 8 cores 8,000 millicores: the page says 4 GiB and 8 CPU cores,
    # as the queue tree's bars do, in the cells and in the sentence.
    cluster = builders.make_cluster("local", capacity={"nodes": 1, "allocatable": {
        "nvidia.com/gpu": 8, "cpu": 32, "memory": 64 * 2**30}})
    team_a = builders.make_queue("team-a", clusters=[cluster], gpu_quota=4, cpu_quota=8000, memory_quota=4295)
    template = builders.make_template("gpu", pod_sets=[builders.pod_set(
        containers=[builders.container(gpu=1, cpu="2", memory="2Gi")])])
    builders.make_job(template, team_a, cluster, name="run", user=admin_user, phase=GangPhase.RUNNING)

    page = ui.get("/queues/team-a/").content.decode()
    table = page.split('id="h-share"')[1].split("</section>")[0]
    rows = {r: table.split(f'<tr data-resource="{r}">')[1].split("</tr>")[0] for r in ("gpu", "cpu", "memory")}
    assert rows["gpu"].startswith('<th scope="row">gpu</th>')  # the unit is in each cell, not "gpu GPU"
    cells = {r: [c.split("<")[0] for c in row.split("<td>")[1:]] for r, row in rows.items()}
    # quota, limit, allocated (two pods of 1 GPU, 2 cores, 2Gi)
    assert cells["gpu"][:3] == ["4 GPUs", "unlimited", "2 GPUs"]
    assert cells["cpu"][:3] == ["8 CPU cores", "unlimited", "4 CPU cores"]
    assert cells["memory"][:3] == ["4 GiB", "unlimited", "4 GiB"]
    memory_text = table.split('<tr data-resource="memory">')[1].split('class="share-text">')[1].split("<")[0]
    assert memory_text.startswith("team-a holds 4 GiB, within its 4 of quota"), memory_text
    assert " MB" not in table and "millicores" not in table
