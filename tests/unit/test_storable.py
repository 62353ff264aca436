"""Cluster text with a NUL (which PostgreSQL refuses in text and jsonb) is stored with U+FFFD in its place: a Kueue
Workload whose condition message holds one, written by hand through its status subresource, and an annotation on
the job's Indexed Job, never make the job's status write fail (issue 37's hostile pass)."""
import pytest

from scheduling.backends.kueue_v1beta2 import KueueV1beta2
from scheduling.db.storable import storable
from scheduling.models import GangJob
from scheduling.reconcile import names, status
from tests import builders
from tests.kube_objects import at, batch_job

pytestmark = pytest.mark.django_db
EVIL = "couldn't assign flavors to pod set worker: x\x00y"


def test_storable_replaces_nul_at_any_depth_and_keeps_the_rest():
    assert storable("a\x00b") == "a\ufffdb"
    assert storable({"k\x00": ["x", {"m": "\x00"}], "n": 1, "t": None}) == {"k\ufffd": ["x", {"m": "\ufffd"}],
                                                                           "n": 1, "t": None}
    assert storable({"m": "\\u0000 as text"}) == {"m": "\\u0000 as text"}  # a backslash-u is not a NUL
    clean = {"m": ["plain"]}
    assert storable(clean) is clean and storable("plain") == "plain"


def test_a_workload_message_and_an_annotation_with_nul_are_stored_without_it(setup, admin_user):
    template, queue, cluster = setup
    job = builders.make_job(template, queue, cluster, user=admin_user)
    job = GangJob.objects.select_related("cluster", "queue").get(pk=job.pk)
    gang = names.gang_name(job.name, job.uid, job.gang_generation)
    workload = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                "metadata": {"name": gang, "namespace": job.namespace, "uid": "wl-uid", "creationTimestamp": at(1),
                             "annotations": {"note": "a\x00b"}},
                "spec": {"queueName": queue.name, "podSets": []},
                "status": {"conditions": [{"type": "QuotaReserved", "status": "False", "reason": "Pending",
                                           "message": EVIL, "lastTransitionTime": at(3)}]}}
    owner = batch_job(name=f"{job.name}-worker", namespace=job.namespace)
    owner["metadata"]["annotations"] = {"evil": "\x00"}
    status.apply_observation(job, KueueV1beta2(), [workload], [], [owner])

    row = GangJob.objects.get(pk=job.pk)
    assert row.phase_reason == "Pending"
    assert row.phase_message.startswith("couldn't assign flavors to pod set worker: x\ufffdy")
    stored = str(row.observed) + str(row.why_pending) + "".join(row.transitions.values_list("message", flat=True))
    assert "\x00" not in stored and "x\ufffdy" in stored
