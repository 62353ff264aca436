"""Queue pages and the jobs list at a glance, in the real browser (strict CSP): jobs pending / running / finished
per queue, the fair-share bar and the wait order; the jobs list's GPUs and waiting-reason columns and grouping;
cancelling several jobs with one confirmation, one of them a job the user may not cancel."""
from datetime import timedelta

import pytest
from django.utils import timezone

from scheduling.choices import DesiredState, GangPhase
from scheduling.models import GangJob
from tests import builders
from tests.ui.browser import log_in

pytestmark = [pytest.mark.ui, pytest.mark.django_db(transaction=True)]


def research(user):
    """research (18 GPUs of capacity) > team-a (quota 8, limit 16) and team-b; jobs of 1 GPU each in every phase."""
    cluster = builders.make_cluster("local", capacity={"nodes": 1, "allocatable": {
        "nvidia.com/gpu": 18, "cpu": 64, "memory": 10**12}})
    top = builders.make_queue("research", clusters=[cluster], gpu_quota=18)
    team_a = builders.make_queue("team-a", parent=top, clusters=[cluster], gpu_quota=8, gpu_limit=16)
    team_b = builders.make_queue("team-b", parent=top, clusters=[cluster])
    template = builders.make_template("gpu", backend="kai", pod_sets=[builders.pod_set(
        replicas=1, containers=[builders.container(gpu=1)])])
    t0 = timezone.now() - timedelta(hours=1)
    plan = {team_a: [("a-wait-1", GangPhase.QUEUED, "train"), ("a-wait-2", GangPhase.QUEUED, "inference"),
                     ("a-new", GangPhase.SUBMITTED, ""), ("a-run", GangPhase.RUNNING, ""),
                     ("a-done", GangPhase.SUCCEEDED, ""), ("a-old", GangPhase.FAILED, "")],
            team_b: [("b-wait", GangPhase.QUEUED, "build"), ("b-run", GangPhase.SCHEDULED, "")]}
    minute = 0
    for queue, jobs in plan.items():
        for name, phase, priority in jobs:
            job = builders.make_job(template, queue, cluster, name=name, phase=phase, user=user)
            minute += 1
            GangJob.objects.filter(pk=job.pk).update(priority_class_name=priority,
                                                     created_at=t0 + timedelta(minutes=minute))
    GangJob.objects.filter(name="a-old").update(phase_changed_at=timezone.now() - timedelta(days=2))
    GangJob.objects.filter(name="a-wait-1").update(why_pending={
        "reason": "OverLimit", "summary": "Queue 'team-a' would go over its GPU limit."})
    return {"cluster": cluster, "team_a": team_a, "team_b": team_b, "template": template}


def counts_of(page, queue: str) -> tuple[str, str, str]:
    box = page.locator(f"#queue-{queue} .jobcounts")
    return tuple(box.locator(f".{k}").inner_text() for k in ("pending", "running", "finished"))


def test_queue_tree_and_queue_page_show_counts_fair_share_bar_and_wait_order(admin_page, admin_user):
    research(admin_user)
    page = admin_page
    page.goto("/queues/")
    assert counts_of(page, "research") == ("4 pending", "2 running", "1 finished in 24 h")  # its children's
    page.locator("#children-of-research > summary").click()
    page.locator("#queue-team-a").wait_for()
    assert counts_of(page, "team-a") == ("3 pending", "1 running", "1 finished in 24 h")
    assert counts_of(page, "team-b") == ("1 pending", "1 running", "0 finished in 24 h")

    page.locator("#queue-team-a .jobcounts .pending").click()  # a leaf's pending count links to those jobs
    page.wait_for_url(lambda url: "/jobs/?queue=team-a&phase=Submitted&phase=Dispatched&phase=Queued" in url)
    assert sorted(page.locator("#job-table tbody tr[data-job]").evaluate_all(
        "rows => rows.map(r => r.dataset.job)")) == ["a-new", "a-wait-1", "a-wait-2"]

    page.goto("/queues/team-a/")
    assert [page.locator(f"#count-{k}").inner_text() for k in ("pending", "running", "finished")] == ["3", "1", "1"]
    gpu = page.locator('table.fair-share tr[data-resource="gpu"]')
    fair = gpu.locator("td.fair").inner_text().split()[0]
    bar = gpu.locator("td.share-bar svg")
    assert bar.locator("line.q-fair").get_attribute("data-fair") == fair
    assert bar.locator("line.q-quota").count() == 1 and bar.get_attribute("data-limit") != "unlimited"
    assert f"fair share {fair} GPU" in bar.get_attribute("aria-label")
    assert "quota 8 GPUs · limit 16 GPUs" in bar.get_attribute("aria-label")
    # KAI's order: inference (125) before train (50) before none (50, later).
    assert page.locator("table.line tbody tr").evaluate_all("rows => rows.map(r => r.dataset.job)") == [
        "a-wait-2", "a-wait-1", "a-new"]
    assert page.locator("table.line tbody tr").first.locator("td").first.inner_text() == "1 of 3 in team-a"

    page.goto("/queues/research/")  # a parent: its subtree's line, each job with its queue
    rows = page.locator("table.line tbody tr")
    assert rows.evaluate_all("rows => rows.map(r => r.dataset.job)") == ["a-wait-2", "b-wait", "a-wait-1", "a-new"]
    assert rows.nth(1).inner_text().split("\t")[:3] == ["2 of 4 in research", "default/b-wait", "team-b"]
    assert page.js_errors == []


def test_jobs_list_shows_gpus_and_why_pending_and_groups_by_queue_cluster_or_phase(admin_page, admin_user):
    research(admin_user)
    page = admin_page
    page.goto("/jobs/")
    row = page.locator('#job-table tr[data-job="a-wait-1"]')
    assert row.locator("td.gpus").inner_text() == "1"
    assert row.locator("td.waiting").inner_text() == "Queue 'team-a' would go over its GPU limit."
    assert page.locator('#job-table tr[data-job="a-run"] td.waiting').inner_text() == ""

    page.get_by_label("Group by").select_option("queue")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url(lambda url: "group=queue" in url)
    heads = page.locator("#job-table tr.group-head")
    assert heads.all_inner_texts() == ["Queue: team-a 6 jobs", "Queue: team-b 2 jobs"]
    names = page.locator("#job-table tbody tr[data-job]").evaluate_all("rows => rows.map(r => r.dataset.job)")
    assert names[:6] == ["a-old", "a-done", "a-run", "a-new", "a-wait-2", "a-wait-1"]  # newest first within it
    assert names[6:] == ["b-run", "b-wait"]

    page.get_by_label("Group by").select_option("phase")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url(lambda url: "group=phase" in url)
    assert [h.split(" ")[1] for h in page.locator("#job-table tr.group-head").all_inner_texts()] == [
        "Submitted", "Queued", "Scheduled", "Running", "Succeeded", "Failed"]
    assert page.locator('#job-table tr.group-head[data-group="Queued"]').inner_text().endswith("3 jobs")
    assert page.js_errors == []


def test_several_jobs_are_cancelled_after_one_confirmation_and_the_one_not_mine_is_refused(page, live_server,
                                                                                          enqueued, queue_syncs,
                                                                                          admin_user):
    world = research(admin_user)
    sam = builders.make_user("sam")
    builders.grant(world["team_a"], "submitter", user=sam)
    mine = [builders.make_job(world["template"], world["team_a"], world["cluster"], name=f"sams-{i}", user=sam,
                              phase=GangPhase.QUEUED) for i in range(2)]
    log_in(page, "sam", "pw-sam")
    page.goto("/jobs/")
    for job in mine:
        page.get_by_label(f"Select default/{job.name}").check()
    page.get_by_label("Select default/a-wait-2").check()  # the admin's job: sam sees it but may not cancel it
    # The list refreshes every 2 s (a new #job-table replaces the marked one); the ticks survive it (hx-preserve).
    page.evaluate("document.getElementById('job-table').dataset.before = 'yes'")
    page.locator("#job-table:not([data-before])").wait_for(state="attached", timeout=8_000)
    assert page.get_by_label("Select default/sams-0").is_checked()
    assert page.get_by_label("Select default/a-wait-2").is_checked()

    page.get_by_role("button", name="Cancel selected jobs…").click()
    page.wait_for_url("**/jobs/cancel/")
    assert page.get_by_role("heading", level=1).inner_text() == "Cancel 2 jobs?"
    assert sorted(page.locator("#cancel-allowed li").evaluate_all("xs => xs.map(x => x.dataset.id)")) == sorted(
        str(j.pk) for j in mine)
    refused = page.locator("#cancel-refused li")
    assert refused.count() == 1 and "it is not your job" in refused.inner_text()
    assert GangJob.objects.filter(desired_state=DesiredState.CANCEL).count() == 0  # nothing yet

    page.get_by_role("button", name="Cancel 2 jobs").click()
    page.locator("#cancel-summary").wait_for()
    assert page.locator("#cancel-summary").inner_text() == "2 jobs cancelled, 1 refused."
    assert "default/a-wait-2" in page.locator("#cancel-refused").inner_text()
    assert sorted(GangJob.objects.filter(desired_state=DesiredState.CANCEL).values_list("name", flat=True)) == [
        "sams-0", "sams-1"]
    page.get_by_role("link", name="← Back to the jobs").click()
    page.wait_for_url("**/jobs/**")
    assert page.locator('#job-table tr[data-job="sams-0"]').inner_text().count("cancelling") == 1
    assert page.js_errors == []
