"""The dashboard against the real control plane, in a real browser: register the local cluster and test the
connection, create a template and a queue, submit a job from the form, watch its timeline advance to Running
without reloading the page, and cancel it.

Reconcile runs in the test's own thread, one pass at a time, the way a worker would run the task each time it is
requeued (the enqueued-task recorder stands in for the broker); the browser only polls the page. It lives under
tests/cluster/ so the session's single control plane (tests/cluster/conftest.py) serves it.
"""
import time

import pytest

import localcluster
from scheduling.backends import registry
from scheduling.choices import DesiredState, GangPhase
from scheduling.models import Cluster, GangJob
from scheduling.reconcile import jobs as job_reconcile
from tests.ui.browser import screenshot
from tests.ui.steps import SPEC_YAML, create_queue, register_cluster

pytestmark = [pytest.mark.cluster, pytest.mark.ui, pytest.mark.django_db(transaction=True)]


def reconcile_until(tab, job_pk: int, phase: str, timeout: float = 90) -> GangJob:
    """Run reconcile passes of the job (as the worker would) until the *page* shows `phase`, which it only can
    by polling: the test never reloads it. Returns the job row."""
    deadline = time.monotonic() + timeout
    badge = tab.locator(f"#job-phase:text-is('{phase}')")
    while True:
        job = GangJob.objects.select_related("cluster", "queue").get(pk=job_pk)
        if not job.is_terminal or job.phase != phase:
            job_reconcile.run_pass(job)
        if badge.count():
            return GangJob.objects.get(pk=job_pk)
        if time.monotonic() > deadline:
            job.refresh_from_db()
            raise AssertionError(f"page never showed {phase}; job is {job.phase} ({job.phase_reason}: "
                                 f"{job.phase_message})")
        tab.wait_for_timeout(700)


def test_register_submit_watch_it_run_and_cancel_from_the_browser(admin_page, kube_cluster, kube_namespace,
                                                                 enqueued, queue_syncs):
    page = admin_page
    register_cluster(page, "local", kube_cluster.kubeconfig)
    page.get_by_role("button", name="Test connection").click()
    page.locator("#cluster-health:text-is('Healthy')").wait_for()
    assert page.locator("#cluster-version").inner_text().startswith("v" + localcluster.binaries.minor_of(
        localcluster.resolve_k8s_version()))
    plugin = registry.select("k8s-workload", set(Cluster.objects.get(name="local").served_apis))
    assert plugin.api_version in page.inner_text("main")
    assert plugin.name in page.locator(f"tr:has-text('{plugin.name}')").inner_text()

    page.goto("/templates/new/")
    page.get_by_label("Name", exact=True).fill("train")
    page.get_by_label("Spec").fill(SPEC_YAML)
    page.get_by_role("button", name="Create template").click()
    page.wait_for_url("**/templates/train/")
    assert "Workload" in page.inner_text("#template-preview")  # the builders' objects, for an example job

    create_queue(page, "team-a", gpu_quota="8", cluster="local", namespaces=kube_namespace)

    page.goto("/submit/?template=train")
    page.get_by_label("Name", exact=True).fill("ui-gang")
    page.get_by_label("Namespace").fill(kube_namespace)
    page.get_by_label("Queue").select_option("team-a")
    page.get_by_label("Cluster").select_option("local")
    page.get_by_label("worker: replicas").fill("3")
    page.get_by_role("button", name="Submit job").click()
    page.wait_for_url("**/jobs/*/")
    job_pk = int(page.url.rstrip("/").rsplit("/", 1)[1])
    page.evaluate("window.gangwebNoReload = 'still here'")

    job = reconcile_until(page, job_pk, GangPhase.RUNNING)
    assert job.phase == GangPhase.RUNNING and job.backend_plugin == plugin.name
    assert page.evaluate("window.gangwebNoReload") == "still here"
    # The objects gangweb sent appear without a reload too (the objects block polls until there are some).
    page.locator("#job-objects summary:has-text('Workload')").wait_for()
    assert page.locator("#job-objects summary:has-text('PodGroup')").count() == 1
    screenshot(page, "job-on-local-cluster", docs=False)
    phases = page.locator(".timeline .ph").all_inner_texts()
    assert phases[0] == "Submitted" and phases[-1] == "Running" and "Dispatched" in phases

    page.get_by_role("button", name="Cancel job").click()
    page.get_by_text("Cancellation requested").wait_for()
    assert GangJob.objects.get(pk=job_pk).desired_state == DesiredState.CANCEL
    page.evaluate("window.gangwebNoReload = 'still here'")
    job = reconcile_until(page, job_pk, GangPhase.CANCELLED)
    assert job.phase == GangPhase.CANCELLED
    assert page.evaluate("window.gangwebNoReload") == "still here"
    assert page.get_by_role("button", name="Resubmit").is_visible()
    assert not page.js_errors
