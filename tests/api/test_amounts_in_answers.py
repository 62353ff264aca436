"""Every amount the API writes goes through amounts.for_api: a whole amount is a JSON integer everywhere (a job's
`gpus`, a queue's quota and limit, the queue tree, the fair share, usage samples: 2, never 2.0 in one place and 2
in another), a fraction stays one; the units are the fields' documented ones (a new user's pass)."""
import json

import pytest

from scheduling.amounts import for_api
from scheduling.choices import GangPhase
from scheduling.models import QueueUsageSample
from tests import builders

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("value, written", [(2.0, 2), (2, 2), (0.5, 0.5), (2147.483648, 2147.483648), (-1.0, -1),
                                            (1e-9, 0), (None, None), (8000, 8000), (0.1 + 0.2, 0.3)])
def test_for_api_writes_whole_amounts_as_integers(value, written):
    out = for_api(value)
    assert out == written and type(out) is type(written)


def _numbers(data, key_filter):
    """Every (path, value) of `data` whose key passes `key_filter`."""
    if isinstance(data, dict):
        for k, v in data.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool) and key_filter(k):
                yield k, v
            yield from _numbers(v, key_filter)
    elif isinstance(data, list):
        for v in data:
            yield from _numbers(v, key_filter)


AMOUNT_KEYS = {"gpus", "quota", "limit", "fair_share", "deserved", "over_quota", "allocated", "requested",
               "borrowed", "lent", "idle_after_quotas", "divided", "estimated_allocated", "estimated_requested",
               "gpu", "cpu", "memory", "gpu_quota", "gpu_limit", "cpu_quota", "cpu_limit", "memory_quota",
               "memory_limit", "allocated_gpu", "requested_gpu", "allocated_cpu", "requested_cpu",
               "allocated_memory", "requested_memory"}


def test_two_gpus_read_2_in_every_answer(api, admin_user):
    cluster = builders.make_cluster("local", capacity={"nodes": 1, "allocatable": {
        "nvidia.com/gpu": 8, "cpu": 64, "memory": 256 * 10**9}, "largest": {}})
    queue = builders.make_queue("team-a", clusters=[cluster], gpu_quota=4, gpu_limit=8)
    template = builders.make_template("gpu", pod_sets=[builders.pod_set(containers=[builders.container(gpu=1)])])
    job = builders.make_job(template, queue, cluster, name="two", user=admin_user, phase=GangPhase.RUNNING)
    QueueUsageSample.objects.create(policy=queue, cluster=cluster, at=job.created_at, allocated_gpu=2.0,
                                    requested_gpu=2.0)
    answers = {
        "job": api.get(f"/api/v1/jobs/{job.pk}/").data, "jobs": api.get("/api/v1/jobs/").data,
        "queue": api.get("/api/v1/queues/team-a/").data, "tree": api.get("/api/v1/queues/tree/").data,
        "fair": api.get("/api/v1/queues/team-a/fair-share/").data,
        "usage": api.get("/api/v1/queues/team-a/usage/").data,
    }
    assert answers["usage"]["samples"][0]["allocated_gpu"] == 2
    assert answers["job"]["gpus"] == 2 and type(answers["job"]["gpus"]) is int
    assert (answers["queue"]["gpu_quota"], answers["queue"]["gpu_limit"]) == (4, 8)
    gpu = answers["fair"]["clusters"][0]["resources"]["gpu"]
    assert (gpu["quota"], gpu["allocated"], gpu["fair_share"]) == (4, 2, 2)  # it asks for 2
    assert answers["tree"]["roots"][0]["resources"]["gpu"]["estimated_allocated"] == 2
    floats = [(name, k, v) for name, data in answers.items()
              for k, v in _numbers(json.loads(json.dumps(data, default=str)), AMOUNT_KEYS.__contains__)
              if isinstance(v, float) and v == int(v)]
    assert floats == []
