"""The queue tree shows the same children-over-parent warning on every sibling, computed once per parent."""
import pytest

from scheduling.choices import QueueWarning
from scheduling.services.queues import payloads as queue_payloads
from scheduling.services.queues import policies as queue_service
from scheduling.services.queues import warnings as queue_warnings
from tests import builders

pytestmark = pytest.mark.django_db


def _codes(node):
    return [w["code"] for w in node["warnings"]]


def test_every_sibling_and_a_new_queue_see_the_children_sum_warning_of_their_parent():
    dept = builders.make_queue("dept", gpu_quota=4)
    for name in ("a", "b", "c"):
        builders.make_queue(f"team-{name}", parent=dept, gpu_quota=2)
    roots = queue_payloads.queue_tree()
    teams = roots[0]["children"]
    assert [t["name"] for t in teams] == ["team-a", "team-b", "team-c"]
    messages = {w["message"] for t in teams for w in t["warnings"] if w["code"] == QueueWarning.CHILDREN_OVER_PARENT}
    assert len(messages) == 1 and "add up to 6 GPUs" in messages.pop()
    assert all(QueueWarning.CHILDREN_OVER_PARENT in _codes(t) for t in teams)

    # A queue not yet saved (the write path) still counts itself among the siblings.
    tree = queue_service.QueueTree.load()
    draft = type(dept)(name="team-d", parent=dept, gpu_quota=1)
    warnings = queue_warnings.warnings_for(draft, tree)
    assert any("add up to 7 GPUs" in w["message"] for w in warnings)
