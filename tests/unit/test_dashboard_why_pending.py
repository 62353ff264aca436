"""Why-pending in plain words, with the numbers a user checks (shape: scheduling/observe/why_pending.py)."""
from scheduling.views.why_pending import amount, explain

OVER_LIMIT = {
    "reason": "OverLimit", "message": "nlp quota has reached the allowable limit of GPUs.",
    "summary": "Queue nlp has reached its GPU limit: 8 of 12 GPUs allocated; this job asks for 8 more.",
    "source": "PodGroup default/x", "pods": {"bound": 0, "required": 5, "total": 5, "created": 5},
    "queue": {"name": "nlp", "resources": {"nvidia.com/gpu": {"quota": 8, "limit": 12, "allocated": 8}}},
    "job_requests": {"nvidia.com/gpu": 8, "cpu": 34, "memory": 300647710720},
}


def test_over_limit_gives_the_summary_what_it_means_and_the_queue_numbers():
    why = explain(OVER_LIMIT)
    assert why.headline == "Queue nlp has reached its GPU limit: 8 of 12 GPUs allocated; this job asks for 8 more."
    assert why.meaning.startswith("The job would push queue 'nlp' (or one of its parents) over its limit")
    assert why.details == [
        "0 of the 5 pods the gang needs are bound.",
        "Queue 'nlp', nvidia.com/gpu: quota 8 GPUs, limit 12 GPUs, allocated 8 GPUs; this job asks for 8 GPUs, "
        "and 4 GPUs are left under the limit.",
    ]


def test_without_queue_numbers_the_job_asks_are_listed_in_readable_units():
    why = explain({"reason": "Unschedulable", "pods": {"bound": 1, "required": 3, "total": 4, "created": 4},
                   "job_requests": {"nvidia.com/gpu": 1, "cpu": 1, "memory": 2 * 1024 ** 3}})
    assert why.headline.startswith("The scheduler cannot place the whole gang at once")
    assert why.details == ["1 of the 3 pods the gang needs are bound (4 pods in all, 4 created).",
                           "This job asks for 1 GPU, 1 CPU core, 2 GiB in all."]


def test_unknown_reason_is_quoted_and_nothing_is_none():
    assert explain(None) is None
    assert explain({}) is None
    assert explain({"reason": "Gobbledygook"}).headline == "The scheduler says: Gobbledygook."
    assert amount("memory", 512) == "512 bytes"
    assert amount("nvidia.com/gpu", -1) == "unlimited"


def test_blocking_facts_come_first_with_their_codes():
    why = explain({"reason": "Unschedulable", "summary": "This job needs 16 GPUs; the cluster has 8 allocatable in "
                                                         "total (2 schedulable nodes).",
                   "pods": {"bound": 0, "required": 2, "total": 2, "created": 2},
                   "blocking": [{"code": "ExceedsClusterCapacity", "resource": "nvidia.com/gpu", "needs": 16,
                                 "available": 8, "nodes": 2,
                                 "message": "needs 16 GPUs; the cluster has 8 allocatable in total (2 schedulable "
                                            "nodes)"},
                                {"code": "QueueOverLimit", "message": "queue a: 12 of 16 GPUs in use, limit 16, "
                                                                      "this gang needs 8"},
                                "not a fact"]})
    assert why.headline.startswith("This job needs 16 GPUs")
    assert why.blocking == [
        {"code": "ExceedsClusterCapacity",
         "message": "Needs 16 GPUs; the cluster has 8 allocatable in total (2 schedulable nodes)."},
        {"code": "QueueOverLimit", "message": "Queue a: 12 of 16 GPUs in use, limit 16, this gang needs 8."}]
