"""The probe's optional facts (RuntimeClasses, PriorityClasses): one refresher reads each with one LIST; one the
credentials may not list (403) keeps its last value and leaves the cluster Healthy. Against a recording HTTPS
server answering as an API server would (tests/fake_apiserver.py)."""
import pytest

from scheduling.kube import client as kube_client
from scheduling.models import Cluster
from scheduling.reconcile import probe
from tests.fake_apiserver import KUBERNETES, RecordingServer

pytestmark = pytest.mark.django_db
RUNTIME = "/apis/node.k8s.io/v1/runtimeclasses"
PRIORITY = "/apis/scheduling.k8s.io/v1/priorityclasses"
FORBIDDEN = (403, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden", "code": 403,
                   "message": "priorityclasses.scheduling.k8s.io is forbidden: User \"gangweb\" cannot list"})


def listing(kind: str, api_version: str, *items: dict) -> tuple[int, dict]:
    return 200, {"kind": f"{kind}List", "apiVersion": api_version, "metadata": {"resourceVersion": "7"},
                 "items": list(items)}


def test_each_fact_is_read_and_one_that_is_forbidden_keeps_its_last_value():
    answers = {**KUBERNETES,
               RUNTIME: listing("RuntimeClass", "node.k8s.io/v1",
                                {"metadata": {"name": "kata"}, "handler": "kata",
                                 "overhead": {"podFixed": {"cpu": "250m"}}}),
               PRIORITY: FORBIDDEN}
    with RecordingServer(answers) as server:
        cluster = Cluster.objects.create(name="fake", kubeconfig=server.kubeconfig(),
                                         priority_classes=["high"], runtime_classes={"old": {}})
        kube_client.forget(cluster.pk)
        cluster = probe.probe_cluster(cluster)
        assert cluster.health == "Healthy"
        row = Cluster.objects.get(pk=cluster.pk)
        assert row.runtime_classes == {"kata": {"cpu": "250m"}}
        assert row.priority_classes == ["high"]  # forbidden: the last list stays

        server.answers[PRIORITY] = listing("PriorityClass", "scheduling.k8s.io/v1",
                                           {"metadata": {"name": "urgent"}, "value": 1000})
        server.answers[RUNTIME] = FORBIDDEN
        assert probe.refresh_optional_facts(row, kube_client.api_client(row)) == {
            "runtime_classes": False, "priority_classes": True}
        assert (row.runtime_classes, row.priority_classes) == ({"kata": {"cpu": "250m"}}, ["urgent"])
        listed = [r["path"].split("?")[0] for r in server.requests]
        assert listed.count(RUNTIME) == 2 and listed.count(PRIORITY) == 2  # one LIST each per refresh
