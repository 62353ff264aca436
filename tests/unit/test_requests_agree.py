"""The job page (why_pending), the capacity facts and the usage estimate count a gang's requests the same way."""
from scheduling.models.jobs import requested_totals
from scheduling.observe.capacity import pod_requests
from scheduling.observe.why_pending import job_requests

SPEC = {"podSets": [{"name": "worker", "replicas": 2, "template": {"spec": {
    "initContainers": [
        # An init container asking more CPU than the main container: the pod needs its peak, 4 cores.
        {"name": "fetch", "resources": {"requests": {"cpu": "4", "memory": "1Gi"}}},
        # A native sidecar (restartPolicy Always) runs beside the main container: added to it.
        {"name": "proxy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}}},
    ],
    "containers": [{"name": "main", "resources": {"limits": {"cpu": "2", "memory": "2Gi", "nvidia.com/gpu": "1"}}}],
    "overhead": {"cpu": "100m"},
}}}]}


def test_init_containers_sidecars_and_overhead_count_the_same_everywhere():
    per_pod = pod_requests(SPEC)
    # cpu: max(main 2 + sidecar 0.5, init peak 4: fetch runs before the sidecar starts) + overhead 0.1 = 4.1;
    # memory: max(2Gi + 256Mi, 1Gi) = 2.25 GiB.
    assert per_pod == [{"cpu": 4.1, "memory": 2415919104, "nvidia.com/gpu": 1}]
    assert job_requests(SPEC) == {"cpu": 8.2, "memory": 4831838208, "nvidia.com/gpu": 2}
    assert requested_totals(SPEC) == (2.0, 8200, 4831838208)


def test_an_unreadable_spec_asks_nothing():
    bad = {"podSets": [{"name": "w", "replicas": 1, "template": {"spec": {
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "lots"}}}]}}}]}
    assert job_requests(bad) == {}
    assert pod_requests(bad) == [{}]
    assert requested_totals(bad) == (0.0, 0, 0)
