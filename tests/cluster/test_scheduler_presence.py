"""Issue 33 item 3, against the real control plane: is a scheduler there? The local cluster runs kube-scheduler
(holding the Lease kube-system/kube-scheduler) and serves the KAI, Volcano and coscheduling APIs from their CRDs,
with none of those schedulers running. The probe says so; a KAI submit warns; its estimate is unknown; it is
listed as stuck once it waited past GANGWEB_STUCK_AFTER_SECONDS (15 min by default; lowered here, never slept).
The cluster page is also read in a browser (docs/screenshots/cluster-schedulers.png)."""
from __future__ import annotations

import uuid

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

localcluster = pytest.importorskip("localcluster")

from scheduling.choices import GangPhase  # noqa: E402
from scheduling.models import GangJob, QueuePolicy  # noqa: E402
from scheduling.observe import presence  # noqa: E402
from scheduling.reconcile import probe  # noqa: E402
from scheduling.services.templates import versions as template_versions  # noqa: E402
from tests import builders  # noqa: E402
from tests.ui.browser import screenshot  # noqa: E402

from .reconcile_support import wait_for  # noqa: E402

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]
SILENT = {"kai": "kai-scheduler", "volcano": "volcano", "coscheduling": "scheduler-plugins-scheduler"}


def probed_presence(world) -> dict:
    """Probe until kube-scheduler is seen (it takes its Lease within seconds of starting); {family: Presence}."""
    def seen():
        probe.probe_cluster(world.cluster)
        world.cluster.refresh_from_db()
        found = presence.all_presence(world.cluster)
        return found if found.get("k8s-workload") and found["k8s-workload"].state == presence.SEEN else None

    return wait_for(seen, timeout=90, interval=2, what="kube-scheduler seen by the probe")


def test_the_probe_sees_kube_scheduler_and_none_of_the_gang_schedulers(world):
    found = probed_presence(world)
    assert found["k8s-workload"].by == "Lease kube-system/kube-scheduler"
    assert found["k8s-workload"].text.startswith("scheduler seen ") and found["k8s-workload"].text.endswith(" s ago")
    for family, name in SILENT.items():
        assert (found[family].state, found[family].scheduler, found[family].text) == (
            presence.NOT_SEEN, name, f"no {name} seen")

    api = APIClient()
    api.force_authenticate(world.user)
    body = api.get(f"/api/v1/clusters/{world.cluster.name}/").json()["scheduler_presence"]
    assert body["kai"]["state"] == "not_seen" and body["k8s-workload"]["state"] == "seen"

    page = Client()
    page.force_login(world.user)
    html = page.get(reverse("scheduling:cluster", args=[world.cluster.name])).content.decode()
    assert "no kai-scheduler seen" in html and "no volcano seen" in html
    assert "API served</span> · <span class=\"presence presence-seen\">scheduler seen" in html


@pytest.mark.ui
def test_the_cluster_page_in_a_browser_shows_kube_scheduler_seen_and_no_gang_scheduler(world, admin_page):
    probed_presence(world)
    page = admin_page
    page.goto(reverse("scheduling:cluster", args=[world.cluster.name]))
    rows = {}
    for row in page.locator("#h-backends ~ .table-wrap tbody tr").all():
        family = row.locator("td").first.inner_text()
        rows.setdefault(family, []).append(row.locator("td").nth(3).inner_text())
    # Each family's served plugin says whether its scheduler is seen; the plugins of versions not served, "not served".
    chosen = {family: [c for c in cells if c.startswith("API served")] for family, cells in rows.items()}
    (k8s,) = chosen["k8s-workload"]
    assert k8s.startswith("API served · scheduler seen ") and k8s.endswith(" s ago"), k8s
    for family, name in SILENT.items():
        assert chosen[family] == [f"API served · no {name} seen"], (family, rows[family])
    # Kueue runs on this worker's control plane once a Kueue test started it there (tests/cluster/conftest.py
    # `kueue_cluster`): then its family is served and its manager seen too.
    kueue = [c for c in chosen.get("kueue", []) if "seen" in c and "no " not in c]
    assert page.locator(".presence-seen").count() == 1 + len(kueue) and page.locator(".presence-not_seen").count() == 3
    screenshot(page, "cluster-schedulers")
    assert not page.js_errors


def test_a_kai_job_where_no_kai_scheduler_runs_warns_is_unknown_and_listed_as_stuck(world, settings):
    probed_presence(world)
    version = template_versions.create_template(
        world.user, f"t-{uuid.uuid4().hex[:8]}", "",
        builders.template_spec(backend="kai", pod_sets=[builders.pod_set(
            "worker", replicas=2, containers=[builders.container(cpu="100m", memory="64Mi")])]))
    api = APIClient()
    api.force_authenticate(world.user)
    r = api.post("/api/v1/jobs/", builders.submit_body(version, QueuePolicy.objects.get(name="team-a"), world.cluster,
                                                       name="kai-alone", namespace=world.namespace), format="json")
    assert r.status_code == 201, r.content
    (warning,) = [w for w in r.json()["warnings"] if w["code"] == "SchedulerNotSeen"]
    assert warning["message"].startswith("no kai-scheduler seen on cluster 'local'")

    job = GangJob.objects.get(pk=r.json()["id"])
    assert world.reconcile(job).error is None
    job.refresh_from_db()
    assert job.phase in (GangPhase.DISPATCHED, GangPhase.QUEUED)
    estimate = api.get(f"/api/v1/jobs/{job.pk}/").json()["estimated_start"]
    assert (estimate["status"], estimate["text"]) == ("unknown", "unknown: no kai-scheduler seen on this cluster")

    settings.GANGWEB_STUCK_AFTER_SECONDS = 1
    page = Client()
    page.force_login(world.user)

    def listed():
        html = page.get(reverse("scheduling:overview")).content.decode()
        return html if "kai-alone" in html.split("Stuck", 1)[-1] else None

    html = wait_for(listed, timeout=60, interval=1, what="kai-alone listed under stuck jobs")
    assert "kai: API served · no kai-scheduler seen" in html
