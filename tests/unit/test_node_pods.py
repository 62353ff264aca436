"""kube/node_pods.py: the on-demand read of what bound pods request per node follows the LIST's pages, leaves out
the pods it is told are gangweb's, counts pods as kube-scheduler does, and stops past its cap."""
import json
from decimal import Decimal

import pytest
from kubernetes import client

from scheduling.kube import node_pods


def pod(name, node, gpu="0", cpu="1", namespace="ns", init_cpu=None):
    spec = {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": {
        "cpu": cpu, "memory": "1Gi", "nvidia.com/gpu": gpu}}}]}
    if init_cpu:
        spec["initContainers"] = [{"name": "i", "resources": {"requests": {"cpu": init_cpu}}}]
    return {"metadata": {"name": name, "namespace": namespace}, "spec": spec}


class Answer:
    def __init__(self, body):
        self.data = json.dumps(body).encode()


@pytest.fixture
def pages(monkeypatch):
    """Serve `pages` (lists of pods) as the LIST's pages, chained by continue tokens; records each call's kwargs."""
    served, calls = [], []

    def list_pods(self, **kwargs):
        calls.append(kwargs)
        at = int(kwargs.get("_continue") or 0)
        more = str(at + 1) if at + 1 < len(served) else None
        return Answer({"items": served[at], "metadata": {"continue": more} if more else {}})

    monkeypatch.setattr(client.CoreV1Api, "list_pod_for_all_namespaces", list_pods)
    return served, calls


def test_every_page_is_read_gangwebs_pods_are_left_out_and_init_peaks_count(pages):
    served, calls = pages
    served += [[pod("a", "n1", gpu="2"), pod("mine", "n1", gpu="4")],
               [pod("b", "n2", cpu="500m", init_cpu="3"), {"metadata": {"name": "bad"}, "spec": "nope"}]]
    read = node_pods.requests_by_node(client.ApiClient(), skip={("ns", "mine")})
    assert read.by_node == {"n1": {"nvidia.com/gpu": Decimal(2), "cpu": Decimal(1), "memory": Decimal(2**30)},
                            "n2": {"cpu": Decimal(3), "memory": Decimal(2**30)}}  # max(3 init, 0.5 main)
    assert (read.pods, read.skipped, read.unreadable) == (2, 1, 1)
    assert [c.get("_continue") for c in calls] == [None, "1"]
    assert calls[0]["field_selector"] == "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"


def test_more_pods_than_the_cap_is_too_many_not_a_partial_answer(pages):
    served, _ = pages
    served += [[pod(f"p{i}", "n1") for i in range(3)]]
    with pytest.raises(node_pods.TooManyPods, match="more than 2 bound pods"):
        node_pods.requests_by_node(client.ApiClient(), skip=set(), max_pods=2)
