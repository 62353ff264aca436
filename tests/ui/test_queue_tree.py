"""The queue tree in the real browser: the top level first, children fetched on expand (htmx, strict CSP), and a
search that finds a queue deep in the tree."""
import pytest

from tests import builders

pytestmark = [pytest.mark.ui, pytest.mark.django_db(transaction=True)]


def three_levels(user):
    """research > team-nlp > nlp-pretrain, and team-vision beside team-nlp; one job in nlp-pretrain."""
    cluster = builders.make_cluster("local")
    research = builders.make_queue("research", gpu_quota=32, clusters=[cluster])
    nlp = builders.make_queue("team-nlp", parent=research, gpu_quota=16, clusters=[cluster])
    builders.make_queue("team-vision", parent=research, gpu_quota=8, clusters=[cluster])
    pretrain = builders.make_queue("nlp-pretrain", parent=nlp, gpu_quota=8, clusters=[cluster])
    template = builders.make_template("llm", pod_sets=[builders.pod_set(
        replicas=2, containers=[builders.container(gpu=4)])])
    builders.make_job(template, pretrain, cluster, name="sft", phase="Running", user=user)


def test_expanding_a_queue_loads_its_children_and_collapsing_hides_them(admin_page, admin_user):
    three_levels(admin_user)
    page = admin_page
    page.goto("/queues/")
    assert page.locator("#queue-research").is_visible()
    assert page.locator("#queue-team-nlp").count() == 0  # not drawn until research is expanded

    page.locator("#children-of-research > summary").click()
    page.locator("#queue-team-nlp").wait_for()
    assert page.locator("#children-of-research > summary").inner_text() == "2 child queues"
    assert page.locator("#queue-team-vision").is_visible()
    # team-nlp's estimate includes its child's running job: 2 pods × 4 GPUs, labelled as gangweb's.
    nlp = page.locator("#queue-team-nlp").inner_text()
    assert "allocated 8 GPUs · requested 8 GPUs" in nlp
    assert "gangweb's estimate" in nlp

    page.locator("#children-of-team-nlp > summary").click()
    page.locator("#queue-nlp-pretrain").wait_for()
    assert "1 active job" in page.locator("#queue-nlp-pretrain").inner_text()

    page.locator("#children-of-research > summary").click()  # collapse: the children stay loaded, hidden
    assert not page.locator("#queue-team-nlp").is_visible()
    page.locator("#children-of-research > summary").click()
    assert page.locator("#queue-nlp-pretrain").is_visible()  # expanded state below is kept
    assert page.js_errors == []


def test_the_search_box_finds_a_deep_queue_and_shows_its_path(admin_page, admin_user):
    three_levels(admin_user)
    page = admin_page
    page.goto("/queues/")
    page.get_by_role("searchbox", name="Find a queue").fill("pretrain")
    page.locator("#queue-nlp-pretrain").wait_for()
    assert "research › team-nlp ›" in page.locator("#queue-nlp-pretrain").inner_text()
    assert "1 queue matches “pretrain”" in page.inner_text("#queue-tree")
    assert page.locator("#queue-research").count() == 0
    assert "q=pretrain" in page.url  # the search is a link one can share
    page.get_by_role("link", name="Back to the tree").click()
    page.locator("#queue-research").wait_for()
    assert page.js_errors == []
