"""The queue page's usage chart (views/queue_usage.py): per resource, allocation and decayed usage over 24 h / 7 d /
30 d from gangweb's own job timelines, on a cluster whose scheduler reports nothing; the window selector's htmx
fragment; a fixed number of queries."""
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from scheduling.db import clock
from tests import builders
from tests.api.test_queue_decayed_usage import HOUR, closed_form, ran

pytestmark = pytest.mark.django_db


@pytest.fixture
def volcano_queue(admin_user):
    """team-a on a Volcano-only cluster (no KAI Queue status, so no reported readings): 1 GPU, 4 cores and 16 GiB
    from 3 h to 2 h ago; 2 GPUs still running since 30 minutes ago."""
    now = clock.now()
    cluster = builders.make_cluster("volcano", available_backends=["volcano-v1beta1"])
    team_a = builders.make_queue("team-a", gpu_quota=4, gpu_limit=8, clusters=[cluster])
    template = builders.make_template("gpu", pod_sets=[builders.pod_set(containers=[builders.container(gpu=1)])])
    ran(builders.make_job(template, team_a, cluster, name="hour", user=admin_user), now, [(0, 3 * HOUR, None)],
        gpu=1, millicores=4000, memory=16 * 2**30, finished_ago=2 * HOUR)
    ran(builders.make_job(template, team_a, cluster, name="now", user=admin_user), now, [(0, HOUR / 2, None)], gpu=2)
    return team_a


def panel(html: str, resource: str) -> str:
    return re.search(rf'<div class="chart usage-panel" data-resource="{resource}">(.*?)</div>\s*(?=<div|{{%|$)',
                     html, re.S).group(1)


def test_the_page_charts_each_resource_from_gangwebs_jobs(client, admin_user, volcano_queue):
    client.force_login(admin_user)
    html = client.get("/queues/team-a/?window=24h").content.decode()
    assert 'data-window="24h"' in html
    gpu, cpu, memory = panel(html, "gpu"), panel(html, "cpu"), panel(html, "memory")
    # 1 GPU·h from the finished job, and 2 GPUs for the last half hour: 2 GPU·h used in the window, peak 2 GPUs.
    assert "peak 2 GPUs · 2 GPU·h used in 24h" in gpu
    assert "peak 4 CPU cores · 4 CPU core·h used in 24h" in cpu
    assert "peak 16 GiB · 16 GiB·h used in 24h" in memory
    for part in (gpu, cpu, memory):
        assert 'class="chart-allocated"' in part and 'class="chart-decayed"' in part
        assert 'class="chart-reported"' not in part  # Volcano reports no per-queue use
    assert 'class="q-quota"' in gpu and 'class="chart-limit"' in gpu  # quota 4, limit 8 GPUs
    # Decayed usage now: 1 GPU·h 2 h old and 2 GPUs over the last half hour, a week's half-life: 1.99 GPU·h.
    assert closed_form(1, 3 * HOUR, 2 * HOUR) + closed_form(2, HOUR / 2, 0) == pytest.approx(1.9887 * HOUR, rel=1e-4)
    assert "decayed usage now 1.99 GPU·h" in gpu
    assert ("Decayed usage (every cluster, this queue): <strong>1.99 GPU·h</strong>, 3.96 CPU core·h, "
            "15.84 GiB·h of memory") in html


def test_the_window_selector_swaps_the_chart_alone(client, admin_user, volcano_queue, django_assert_max_num_queries):
    client.force_login(admin_user)
    page = client.get("/queues/team-a/").content.decode()
    assert 'hx-get="/queues/team-a/usage/"' in page and 'data-window="7d"' in page  # the default window
    # session, user, the queue, the read check, the tree, the jobs and their entries (2), KAI's readings (2)
    with django_assert_max_num_queries(9):
        fragment = client.get("/queues/team-a/usage/?window=30d", HTTP_HX_REQUEST="true").content.decode()
    assert fragment.lstrip().startswith('<div id="usage-charts" data-window="30d">')
    assert "<html" not in fragment and "used in 30d" in fragment
    # 30 d in 6-hour buckets: 120 points on each decayed line.
    points = re.search(r'class="chart-decayed"[^>]*points="([^"]+)"', fragment).group(1).split()
    assert len(points) == 120


def test_the_chart_costs_the_same_queries_with_more_jobs(client, admin_user, volcano_queue):
    client.force_login(admin_user)

    def count():
        with CaptureQueriesContext(connection) as ctx:
            assert client.get("/queues/team-a/usage/?window=7d").status_code == 200
        return len(ctx.captured_queries)

    before = count()
    template = builders.make_template("more", pod_sets=[builders.pod_set(containers=[builders.container(gpu=1)])])
    now = clock.now()
    for i in range(20):
        ran(builders.make_job(template, volcano_queue, volcano_queue.clusters.first(), name=f"more-{i}",
                              user=admin_user), now, [(0, (i + 1) * HOUR, None)], gpu=1, finished_ago=i * HOUR)
    assert count() == before


def test_a_reader_without_a_role_on_the_queue_gets_404(client, volcano_queue, django_user_model):
    stranger = django_user_model.objects.create_user("stranger", password="x")
    client.force_login(stranger)
    assert client.get("/queues/team-a/usage/").status_code == 404


def test_the_page_says_the_decayed_usage_in_the_fair_share_sentence_and_orders_the_line(client, admin_user, settings,
                                                                                       django_assert_max_num_queries):
    """team-a used 4 GPUs for a day (ended an hour ago) and team-b nothing; each has a pending KAI job, team-a's
    submitted first. Listed in GANGWEB_USAGE_ORDERED_CLUSTERS, team-b's job is first across research."""
    from datetime import timedelta

    from scheduling.choices import GangPhase
    from scheduling.models import GangJob

    settings.GANGWEB_USAGE_ORDERED_CLUSTERS = ["local"]
    now = clock.now()
    cluster = builders.make_cluster("local", capacity={"nodes": 1, "allocatable": {
        "nvidia.com/gpu": 8, "cpu": 64, "memory": 256 * 10**9}, "largest": {}})
    research = builders.make_queue("research", clusters=[cluster], gpu_quota=8)
    team_a = builders.make_queue("team-a", parent=research, clusters=[cluster], gpu_quota=4)
    team_b = builders.make_queue("team-b", parent=research, clusters=[cluster], gpu_quota=4)
    template = builders.make_template("base", backend="kai")
    ran(builders.make_job(template, team_a, cluster, name="used", user=admin_user), now, [(0, 25 * HOUR, None)],
        gpu=4, finished_ago=HOUR, phase=GangPhase.SUCCEEDED)
    for name, queue, ago in (("a-wait", team_a, 20), ("b-wait", team_b, 10)):
        job = builders.make_job(template, queue, cluster, name=name, user=admin_user, phase=GangPhase.QUEUED)
        GangJob.objects.filter(pk=job.pk).update(created_at=now - timedelta(minutes=ago))
    client.force_login(admin_user)
    # the page's 21 (its use per cluster included) + the line's listed clusters and decayed usage (3)
    with django_assert_max_num_queries(24):
        html = client.get("/queues/team-a/").content.decode()
    assert "the most of its siblings (team-b 0 GPU·h): its jobs go after team-b&#x27;s when both wait." in html
    # team-a's job is second across research although submitted first.
    assert re.search(r'<tr data-job="a-wait"><td>1 of 1 in team-a</td>.*?<td>2 of 2 in research</td>', html, re.S)
