"""The lazy queue tree page: top level first, children on expand a level at a time and a page at a time, search."""
import pytest

from scheduling.views import queues as queue_views
from tests import builders

pytestmark = pytest.mark.django_db


@pytest.fixture
def dept():
    parent = builders.make_queue("dept", gpu_quota=4)
    for i in range(5):
        builders.make_queue(f"team-{i}", parent=parent, gpu_quota=2)
    return parent


def test_the_page_draws_the_top_level_with_child_counts(ui, dept):
    response = ui.get("/queues/")
    assert [(n["name"], n["children_count"], n["children"]) for n in response.context["roots"]] == [
        ("dept", 5, [])]
    html = response.content.decode()
    assert 'hx-get="/queues/dept/children/"' in html and "5 child queues" in html
    assert 'id="queue-team-0"' not in html  # named in dept's warning, not drawn


def test_expanding_shows_children_a_page_at_a_time(ui, dept, monkeypatch):
    monkeypatch.setattr(queue_views, "CHILDREN_SHOWN", 3)
    first = ui.get("/queues/dept/children/")
    assert [n["name"] for n in first.context["nodes"]] == ["team-0", "team-1", "team-2"]
    assert "Show 2 more of 2 remaining" in first.content.decode()
    more = ui.get("/queues/dept/children/?offset=3")
    assert [n["name"] for n in more.context["nodes"]] == ["team-3", "team-4"]
    assert "more of" not in more.content.decode()
    # Each child names the shared children-sum warning once (5 x 2 GPUs over 4) instead of repeating it.
    assert first.content.decode().count("add up to more than dept's quota") == 3


def test_expanding_an_unknown_queue_is_a_404(ui, dept):
    assert ui.get("/queues/nope/children/").status_code == 404


def test_search_finds_queues_anywhere_by_name(ui, dept):
    response = ui.get("/queues/?q=TEAM-4")
    assert [(n["name"], n["path"]) for n in response.context["roots"]] == [("team-4", ["dept"])]
    assert response.context["matched"] == 1
