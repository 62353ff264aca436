"""Why-pending in plain words, with the numbers a user checks."""
from scheduling.views.why_pending import explain


def test_over_limit_names_the_queue_and_its_numbers():
    why = explain({"reason": "OverLimit", "podsBound": 0, "podsRequired": 5, "message": "limit reached",
                   "queue": {"name": "nlp", "resources": {"gpu": {"quota": 8, "limit": 12, "allocated": 8}}},
                   "jobRequests": {"gpu": 8}})
    assert why.headline == "The job would push queue 'nlp' over its limit, so the scheduler holds it back."
    assert why.details == ["0 of 5 required pods are bound.",
                           "Queue 'nlp' gpu: quota 8, limit 12, allocated 8 GPU; this job asks for 8 and 4 GPU are "
                           "left under the limit."]
    assert why.message == "limit reached"


def test_unknown_reason_is_quoted_and_nothing_is_none():
    assert explain(None) is None
    assert explain({}) is None
    assert explain({"reason": "Gobbledygook"}).headline == "The scheduler says: Gobbledygook."
    assert explain({"pods_bound": 1, "pods_required": 3}, "Queued").details == ["1 of 3 required pods are bound."]
