"""The jobs page's GPU and waiting-reason columns, grouping, ?name=, and the bulk cancel's confirmation and result
pages: the same services as the API (services/jobs/lists.py, services/jobs/bulk_cancel.py)."""
import re

import pytest

from scheduling.choices import DesiredState, GangPhase
from scheduling.models import GangJob
from tests import builders


@pytest.fixture
def world(admin_user):
    local, spare = builders.make_cluster("local"), builders.make_cluster("spare")
    team_a = builders.make_queue("team-a", clusters=[local, spare])
    team_b = builders.make_queue("team-b", clusters=[local, spare])
    gpus = builders.make_template("gpus", pod_sets=[builders.pod_set(replicas=3, containers=[
        builders.container(gpu=2)])])
    jobs = {
        "a-wait": builders.make_job(gpus, team_a, local, name="a-wait", phase=GangPhase.QUEUED, user=admin_user),
        "a-run": builders.make_job(gpus, team_a, spare, name="a-run", phase=GangPhase.RUNNING, user=admin_user),
        "b-wait": builders.make_job(gpus, team_b, local, name="b-wait", phase=GangPhase.QUEUED, user=admin_user),
        "b-done": builders.make_job(gpus, team_b, spare, name="b-done", phase=GangPhase.FAILED, user=admin_user),
    }
    GangJob.objects.filter(name="a-wait").update(why_pending={"reason": "OverLimit",
                                                             "summary": "Queue 'team-a' is over its GPU limit."})
    GangJob.objects.filter(name="b-wait").update(why_pending={"reason": "Unschedulable"})
    return {"jobs": jobs, "team_a": team_a, "team_b": team_b, "local": local, "template": gpus}


def rows(html: str) -> list[str]:
    return re.findall(r'<tr data-job="([^"]+)"', html)


def cell(html: str, job: str, css: str) -> str:
    row = html.split(f'<tr data-job="{job}">', 1)[1].split("</tr>", 1)[0]
    return re.search(rf'<td class="[^"]*{css}[^"]*">(.*?)</td>', row, re.S).group(1).strip()


def test_each_row_shows_its_gangs_gpus_and_why_it_waits(ui, world):
    html = ui.get("/jobs/").content.decode()
    assert cell(html, "a-wait", "gpus") == "6"  # 3 pods x 2 GPUs
    assert cell(html, "a-wait", "waiting") == "Queue &#x27;team-a&#x27; is over its GPU limit."
    assert cell(html, "b-wait", "waiting") == "Unschedulable"
    assert cell(html, "a-run", "waiting") == "" and cell(html, "b-done", "waiting") == ""


def test_name_filters_the_page_as_the_api(ui, world):
    assert rows(ui.get("/jobs/?name=WAIT").content.decode()) == ["b-wait", "a-wait"]


@pytest.mark.parametrize("group, heads", [
    ("queue", [("team-a", "2 jobs"), ("team-b", "2 jobs")]),
    ("cluster", [("local", "2 jobs"), ("spare", "2 jobs")]),
    ("phase", [("Queued", "2 jobs"), ("Running", "1 job"), ("Failed", "1 job")]),
])
def test_grouping_puts_each_groups_rows_under_one_heading_with_its_count(ui, world, group, heads):
    html = ui.get(f"/jobs/?group={group}").content.decode()
    found = re.findall(r'<tr class="group-head" data-group="([^"]+)">.*?group-count">([^<]+)</span>', html, re.S)
    assert found == heads
    order = [getattr(GangJob.objects.get(name=n), group if group == "phase" else f"{group}").__str__()
             for n in rows(html)]
    assert order == sorted(order, key=[h for h, _ in heads].index)


def test_only_jobs_that_can_still_be_cancelled_have_a_checkbox(ui, world):
    html = ui.get("/jobs/").content.decode()
    ticked = re.findall(r'name="ids" value="(\d+)"', html)
    assert sorted(int(i) for i in ticked) == sorted(world["jobs"][n].pk for n in ("a-wait", "a-run", "b-wait"))


def test_bulk_cancel_confirms_then_cancels_and_reports_each_job(client, world, admin_user):
    sam = builders.make_user("sam")
    builders.grant(world["team_a"], "submitter", user=sam)
    builders.grant(world["team_b"], "submitter", user=sam)
    mine = builders.make_job(world["template"], world["team_a"], world["local"], name="sams", user=sam)
    old = builders.make_job(world["template"], world["team_b"], world["local"], name="sams-old", user=sam,
                            phase=GangPhase.FAILED)
    client.force_login(sam)
    ids = [mine.pk, world["jobs"]["a-wait"].pk, old.pk]
    page = client.post("/jobs/cancel/", {"ids": ids, "back": "group=queue"})
    assert page.status_code == 200
    html = page.content.decode()
    assert "Cancel 1 job?" in html
    assert re.findall(r'<li data-id="(\d+)">', html.split('id="cancel-allowed"')[1].split("</ul>")[0]) == [
        str(mine.pk)]
    refused = html.split('id="cancel-refused"')[1].split("</ul>")[0]
    assert re.findall(r'<li data-id="(\d+)">.*?class="reason">([^<]+)<', refused, re.S) == [
        (str(world["jobs"]["a-wait"].pk), "not allowed to cancel this job: only its submitter (with the submitter "
         "role) or an admin of queue &#x27;team-a&#x27; may; it is not your job, and you have submitter on that queue"),
        (str(old.pk), "job already finished as Failed")]
    assert GangJob.objects.get(pk=mine.pk).desired_state == DesiredState.RUN  # the confirmation changes nothing
    assert "2 of the 3 selected jobs will not be cancelled" in html
    posted = client.post("/jobs/cancel/", {"ids": ids, "confirm": "yes", "back": "group=queue"})
    # Post/redirect/get: the result is a page of its own, so a reload shows it again and cancels nothing.
    assert posted.status_code == 303 and posted["Location"].startswith("/jobs/cancel/?done=")
    assert [GangJob.objects.get(pk=i).desired_state for i in ids] == [DesiredState.CANCEL, DesiredState.RUN,
                                                                       DesiredState.RUN]
    GangJob.objects.filter(pk=mine.pk).update(desired_state=DesiredState.RUN)  # a reload must not cancel it again
    for _ in range(2):
        done = client.get(posted["Location"])
        assert done.status_code == 200
        html = done.content.decode()
        assert "1 job cancelled, 2 refused." in html
        assert f'href="/jobs/{mine.pk}/">default/sams</a>' in html and "?group=queue" in html
    assert GangJob.objects.get(pk=mine.pk).desired_state == DesiredState.RUN
    # Without the result's token (or after logging in elsewhere) there is nothing to show: back to the list.
    for url in ("/jobs/cancel/", "/jobs/cancel/?done=forged"):
        response = client.get(url)
        assert (response.status_code, response["Location"]) == (302, "/jobs/")


def test_bulk_cancel_says_one_selected_job_will_not_be_cancelled_in_the_singular(client, world):
    sam = builders.make_user("sam")
    builders.grant(world["team_a"], "submitter", user=sam)
    client.force_login(sam)
    html = client.post("/jobs/cancel/", {"ids": [world["jobs"]["a-wait"].pk]}).content.decode()
    assert "The selected job will not be cancelled" in html and "selected job will" in html
    mine = builders.make_job(world["template"], world["team_a"], world["local"], name="sams", user=sam)
    html = client.post("/jobs/cancel/", {"ids": [mine.pk, world["jobs"]["a-wait"].pk]}).content.decode()
    assert "1 of the 2 selected jobs will not be cancelled" in html


@pytest.mark.parametrize("data", [{}, {"ids": ["x"]}, {"ids": ["1", "1"]}])
def test_bulk_cancel_without_a_valid_selection_is_a_400_that_changes_nothing(ui, world, data):
    response = ui.post("/jobs/cancel/", {**data, "confirm": "yes"})
    assert response.status_code == 400
    assert not GangJob.objects.filter(desired_state=DesiredState.CANCEL).exists()
