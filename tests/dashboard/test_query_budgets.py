"""Query budgets: every dashboard page runs a fixed number of SQL queries, the same with 10 rows of everything
as with 1,000 (jobs, queues, templates, template versions, clusters)."""
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from scheduling.choices import GangPhase
from scheduling.db import keyset
from scheduling.models import (
    Cluster,
    GangJob,
    PhaseTransition,
    QueuePolicy,
    QueueUsageSample,
    RuntimeTemplate,
    RuntimeTemplateVersion,
)
from scheduling.services.jobs import lifecycle as job_service
from tests import builders

LAST = keyset.encode(None, keyset.LAST)
# Page -> the most queries it may run (session and user lookups included).
BUDGETS = {
    "/": 15,  # jobs by phase is two counts: active jobs, and jobs finished in the last 24 hours; + the clusters side by
    # side (services/clusters/summary.py: gangweb's use and waiting jobs per cluster in one GROUP BY, the queue
    # parents and the queue states the schedulers' reports are read from)
    "/queues/": 7,  # jobs pending / running / finished in 24 h per queue read with the usage: one GROUP BY
    "/queues/?q=team&cluster=local": 7,
    "/queues/org/children/": 6,
    # + fair share (clusters, queue-cluster links, usage by cluster) + wait order + decayed usage (2: the subtree's
    # recent jobs, then their Running entries; no join, issue 14) + Kueue's report (its kueue queue states) + its use
    # per cluster (services/queues/per_cluster.py: the subtree's cluster links, its jobs grouped by cluster, its queue
    # states with a status, the clusters)
    "/queues/team-a/?window=7d": 21,
    "/queues/org/": 21,  # a parent: its subtree's wait order
    "/jobs/": 6,
    "/jobs/?phase=Running&sort=-in_phase&cursor=" + LAST: 6,  # a keyset page: the last one
    "/jobs/?group=queue&name=job": 8,  # + jobs per group and the groups' names
    "/jobs/?group=phase&sort=name": 7,  # + jobs per phase
    "/jobs/{job}/": 5,
    "/jobs/{job}/live/": 5,
    "/jobs/{job}/objects/": 4,
    "/submit/?template=base": 6,
    "/templates/": 4,
    "/templates/base/": 5,
    "/clusters/": 4,  # active jobs per cluster: a GROUP BY of its own, not a join (issue 14, stale statistics)
    "/clusters/local/": 5,  # + the capacity section's node list (this cluster's were never listed: nothing more)
}
# A user who is not a platform admin also has what the database says of them read: their grants, group membership
# and the queue tree with its cluster links, in one statement per request (services/access/facts.py; 4 to 6 before).
NON_ADMIN_BUDGETS = {
    "/": 17,  # + the access statement, + the queues they may see (for the clusters' queue states)
    "/queues/": 9,  # + the access statement, + the queues they may see (the tree's filter)
    "/queues/?q=team&cluster=local": 9,
    "/queues/org/children/": 8,
    # + the access statement, + whether they may see the queue, + the queues they may see; the fair share names
    # only the clusters they may see (known from the access statement: nothing more)
    "/queues/team-a/?window=7d": 24,
    "/queues/org/": 24,
    "/jobs/": 7,
    "/jobs/?phase=Running&sort=-in_phase&cursor=" + LAST: 7,
    "/jobs/?group=queue&name=job": 9,
    "/jobs/?group=phase&sort=name": 8,
    "/jobs/{job}/": 6,
    "/jobs/{job}/live/": 6,
    "/jobs/{job}/objects/": 4,
    "/submit/?template=base": 7,
    "/templates/": 5,
    "/templates/base/": 6,
    "/clusters/": 5,
    "/clusters/local/": 7,  # + the access statement, + whether they may change the scheduler names (seen again)
}
PHASES = [GangPhase.SUBMITTED, GangPhase.QUEUED, GangPhase.RUNNING, GangPhase.FAILED, GangPhase.SUCCEEDED]


def grow(n: int, user, start: int) -> None:
    """Add `n` rows of each kind, indices from `start`: queues (every tenth a parent of the next nine), clusters,
    templates and versions, and jobs in a mix of phases with a timeline each, some stuck in Queued."""
    spec = builders.template_spec()
    base = RuntimeTemplate.objects.get(name="base")
    last = base.versions.order_by("-version").first().version
    RuntimeTemplateVersion.objects.bulk_create(
        RuntimeTemplateVersion(template=base, version=last + i + 1, spec=spec) for i in range(n))
    templates = RuntimeTemplate.objects.bulk_create(RuntimeTemplate(name=f"t-{start + i}") for i in range(n))
    RuntimeTemplateVersion.objects.bulk_create(RuntimeTemplateVersion(template=t, version=1, spec=spec)
                                               for t in templates)
    Cluster.objects.bulk_create(Cluster(name=f"c-{start + i}") for i in range(n))
    org = QueuePolicy.objects.get(name="org")  # so the children of "org" grow too
    parents = QueuePolicy.objects.bulk_create(QueuePolicy(name=f"p-{start + i}", gpu_quota=8, parent=org)
                                              for i in range(0, n, 10))
    QueuePolicy.objects.bulk_create(QueuePolicy(name=f"q-{start + i}", parent=parents[i // 10], gpu_quota=1)
                                    for i in range(n) if i % 10)
    items = [builders.submit_body(base.versions.first(), QueuePolicy.objects.get(name="team-a"),
                                  Cluster.objects.get(name="local"), name=f"job-{start + i}",
                                  overrides={"podSets": {"worker": {"resources": {"nvidia.com/gpu": "1"}}}})
             for i in range(n)]
    for item in items:
        item["template"] = "base"
    created = job_service.submit_many(user, items)
    old = timezone.now() - timedelta(days=1)
    for i, job in enumerate(created):
        job.phase = PHASES[i % len(PHASES)]
        job.phase_changed_at = old
    GangJob.objects.bulk_update(created, ["phase", "phase_changed_at"])
    PhaseTransition.objects.bulk_create(PhaseTransition(job=j, phase=j.phase, at=old, source="test")
                                        for j in created if j.phase != GangPhase.SUBMITTED)
    team_a = QueuePolicy.objects.get(name="team-a")
    QueueUsageSample.objects.bulk_create(QueueUsageSample(policy=team_a, cluster_id=cluster_id, at=old + timedelta(
        minutes=i), allocated_gpu=i % 4, requested_gpu=i % 6) for i in range(n) for cluster_id in [
        Cluster.objects.get(name="local").pk])


def count_queries(client, url: str) -> int:
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    return len(ctx.captured_queries)


@pytest.mark.parametrize("principal", ["platform admin", "queue submitter"])
def test_every_page_stays_within_its_query_budget_from_10_to_1000_rows(ui, admin_user, principal, analyze):
    cluster = builders.make_cluster("local")
    org = builders.make_queue("org", clusters=[cluster])
    team_a = builders.make_queue("team-a", parent=org, clusters=[cluster])
    budgets = BUDGETS
    if principal == "queue submitter":
        user = builders.make_user("sam")
        builders.grant(team_a, "submitter", user=user)
        ui.force_login(user)
        budgets = NON_ADMIN_BUDGETS
    template = builders.make_template("base", pod_sets=[builders.pod_set(containers=[builders.container(gpu=1)])])
    job = builders.make_job(template, QueuePolicy.objects.get(name="team-a"), cluster, name="watched",
                            phase=GangPhase.RUNNING, user=admin_user)
    urls = {page: page.format(job=job.pk) for page in BUDGETS}
    grow(10, admin_user, 0)
    analyze()
    small = {page: count_queries(ui, url) for page, url in urls.items()}
    grow(990, admin_user, 10)
    analyze()  # the plans with stale statistics are test_stale_statistics.py's subject, not this test's
    assert GangJob.objects.count() == 1001
    large = {page: count_queries(ui, url) for page, url in urls.items()}
    assert large == small, "query counts changed from 10 to 1,000 rows"
    over = {page: n for page, n in small.items() if n > budgets[page]}
    assert not over, f"over budget: {over} (budgets {budgets})"
