"""The slim projections a resync snapshot keeps of listed Pods and Services (pure functions)."""
import pytest

from scheduling.backends import kai_v2alpha2
from scheduling.kube.objects import JOB, POD, SERVICE
from scheduling.observe.pods import pod_facts
from scheduling.reconcile.observed import projection, slim_pod, slim_service

META = {"name": "j-0", "namespace": "ns", "uid": "u1", "resourceVersion": "42",
        "labels": {"gangweb.io/job-uid": "abc", "batch.kubernetes.io/job-name": "j"},
        "deletionTimestamp": "2026-01-01T00:00:03Z", "finalizers": ["x"]}
POD_BODY = {
    "apiVersion": "v1", "kind": "Pod", "metadata": META,
    "spec": {"nodeName": "n1", "schedulerName": "kai-scheduler", "schedulingGroup": {"podGroupName": "g"},
             "containers": [{"name": "main", "image": "x", "env": [{"name": "A", "value": "1"}]}],
             "volumes": [{"name": "token", "projected": {}}], "tolerations": [{"key": "t"}]},
    "status": {"phase": "Running", "startTime": "2026-01-01T00:00:01Z", "podIP": "10.0.0.1", "qosClass": "Burstable",
               "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
               "containerStatuses": [{"name": "main", "state": {"running": {"startedAt": "2026-01-01T00:00:02Z"}}}]},
}


def test_a_slim_pod_keeps_metadata_node_group_and_the_status_fields_pod_facts_read():
    slim = slim_pod(POD_BODY)
    assert slim["metadata"] == META
    assert slim["spec"] == {"nodeName": "n1", "schedulerName": "kai-scheduler",
                            "schedulingGroup": {"podGroupName": "g"}}
    assert sorted(slim["status"]) == ["conditions", "containerStatuses", "phase", "startTime"]


def test_a_slim_pod_says_the_same_as_the_whole_pod():
    assert pod_facts(slim_pod(POD_BODY)) == pod_facts(POD_BODY)


def test_a_slim_pod_of_an_unbound_pod_has_empty_spec_and_status_when_the_cluster_said_nothing():
    slim = slim_pod({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": []}})
    assert slim == {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}, "status": {}}


def test_a_slim_service_keeps_only_its_identity():
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": META, "spec": {"clusterIP": "None", "ports": []}}
    assert slim_service(svc) == {"apiVersion": "v1", "kind": "Service", "metadata": META}


@pytest.mark.parametrize(("ref", "kept_whole"), [(POD, False), (SERVICE, False), (JOB, True),
                                                 (kai_v2alpha2.POD_GROUP, True)])
def test_gang_objects_and_indexed_jobs_are_kept_whole_for_drift_and_the_observed_record(ref, kept_whole):
    assert (projection(ref) is None) is kept_whole
