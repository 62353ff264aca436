"""Browser tests of the dashboard's forms: log in, register a cluster, create a template and a queue, submit a
job from the form, see a form error for a bad override, cancel a job."""
import pytest

from scheduling.choices import DesiredState
from scheduling.models import Cluster, GangJob, QueuePolicy, RuntimeTemplate
from tests import builders
from tests.ui.browser import log_in
from tests.ui.steps import SPEC_YAML, create_queue, register_cluster

pytestmark = [pytest.mark.ui, pytest.mark.django_db(transaction=True)]

KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: ctx, context: {cluster: c, user: u}}]
current-context: ctx
"""


def test_login_with_a_wrong_password_is_refused_then_the_right_one_works(page, admin_user):
    page.goto("/jobs/")
    assert "/accounts/login/" in page.url
    page.get_by_label("Username").fill("admin")
    page.get_by_label("Password").fill("wrong-password")
    page.get_by_role("button", name="Log in").click()
    assert page.get_by_role("alert").is_visible()
    log_in(page)
    assert page.get_by_role("heading", name="Overview").is_visible()
    assert not page.js_errors


def test_register_cluster_create_template_and_queue_then_submit_from_the_form(admin_page, tmp_path):
    page = admin_page
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)

    register_cluster(page, "local", kubeconfig)
    cluster = Cluster.objects.get(name="local")
    assert cluster.kubeconfig.strip().startswith("apiVersion: v1") or cluster.kubeconfig  # stored, maybe encrypted
    assert "token: t" not in page.content()  # never shown after upload

    page.goto("/templates/new/")
    page.get_by_label("Name", exact=True).fill("llm")
    page.get_by_label("Spec").fill(SPEC_YAML)
    page.get_by_role("button", name="Preview").click()
    preview = page.locator("#template-preview")
    preview.get_by_text("creates 2 pods").wait_for()
    # One unit style for people (issue 19 part 6): 2 pods x (1 CPU, 1Gi, 1 GPU), never millicores or MB.
    assert "asking for 2 GPUs, 2 CPU cores and 2 GiB in all" in preview.inner_text()
    page.get_by_role("button", name="Create template").click()
    page.wait_for_url("**/templates/llm/")
    assert RuntimeTemplate.objects.get(name="llm").versions.count() == 1

    create_queue(page, "team-a", gpu_quota="8", cluster="local")
    queue = QueuePolicy.objects.get(name="team-a")
    assert (queue.gpu_quota, queue.gpu_limit) == (8, -1)
    node = page.locator("#queue-team-a")
    assert node.get_by_text("quota 8 GPUs · limit unlimited").is_visible()
    # Every limit is unlimited (-1): drawn as an open end, never as a region; CPU and memory have no quota set, so
    # they have no quota mark and are not painted over quota; the KAI Queue's own values are on hover.
    assert node.locator('svg[data-limit="unlimited"]').count() == 3
    assert node.locator("rect.q-limit").count() == 0 and node.locator("line.q-unlimited").count() == 3
    assert node.locator('svg[data-over-quota="yes"]').count() == 0 and node.locator("rect.q-over").count() == 0
    assert node.locator("line.q-quota").count() == 1  # the GPU quota only
    assert "no quota · limit unlimited" in node.inner_text()
    assert node.locator(".nums").first.get_attribute("title") == "KAI quota 8 devices, limit -1 (unlimited)"

    page.goto("/submit/")
    page.get_by_label("Template").select_option("llm")
    page.get_by_label("worker: replicas").wait_for()  # htmx swapped in the template's override inputs
    page.get_by_label("Name", exact=True).fill("train-1")
    page.get_by_label("Queue").select_option("team-a")
    page.get_by_label("Cluster").select_option("local")
    page.get_by_label("worker: replicas").fill("3")
    page.get_by_label("worker: nvidia.com/gpu per pod").fill("2")
    page.get_by_role("button", name="Submit job").click()
    page.wait_for_url("**/jobs/*/")
    job = GangJob.objects.get(name="train-1")
    assert job.resolved_spec["podSets"][0]["replicas"] == 3
    assert page.locator("#job-phase").inner_text() == "Submitted"
    assert "3 pods · 6 GPUs · 3 CPU cores · 3 GiB" in page.inner_text("main")
    assert not page.js_errors


def test_a_bad_override_shows_the_api_message_under_its_input(admin_page, admin_user):
    page = admin_page
    builders.make_template("llm")
    queue, cluster = builders.make_queue("team-a"), builders.make_cluster("local")
    page.goto("/submit/?template=llm")
    page.get_by_label("Name", exact=True).fill("train-bad")
    page.get_by_label("Queue").select_option(queue.name)
    page.get_by_label("Cluster").select_option(cluster.name)
    page.get_by_label("worker: replicas").fill("0")
    page.get_by_label("worker: cpu per pod").fill("1.5.3")
    page.get_by_role("button", name="Submit job").click()
    error = page.locator(".field.has-error .errorlist")
    error.first.wait_for()
    # The service checks pod-set fields in order; replicas comes first and its message is the API's.
    assert error.first.inner_text() == "must be at least 1, got 0"
    assert page.get_by_label("worker: replicas").input_value() == "0"  # what the user typed is kept
    assert not GangJob.objects.filter(name="train-bad").exists()


def test_cancel_from_the_job_page(admin_page, admin_user):
    page = admin_page
    template, queue, cluster = builders.make_template("llm"), builders.make_queue("team-a"), builders.make_cluster()
    job = builders.make_job(template, queue, cluster, name="to-cancel", phase="Queued", user=admin_user)
    page.goto(f"/jobs/{job.pk}/")
    page.get_by_role("button", name="Cancel job").click()
    page.get_by_text("Cancellation requested").wait_for()
    job.refresh_from_db()
    assert job.desired_state == DesiredState.CANCEL
    assert page.get_by_text("cancelling…").is_visible()
    assert page.get_by_role("button", name="Cancel job").count() == 0
