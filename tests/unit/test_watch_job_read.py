"""The watch reads the job a label names with two fixed statements (`watching.job_with_cluster`), not a compiled
`select_related` queryset: the instances must be exactly what the ORM returns."""
from __future__ import annotations

import uuid

import pytest

from scheduling.choices import GangPhase
from scheduling.models import Cluster, GangJob
from scheduling.reconcile.watching import job_with_cluster
from tests import builders


@pytest.mark.django_db
def test_the_job_and_its_cluster_are_read_as_the_orm_reads_them(admin_user):
    cluster = builders.make_cluster("local", served_apis=["scheduling.k8s.io/v1alpha2"], capacity={"cpu": 64000},
                                    scheduler_names={"kai": "kai-scheduler"}, kubeconfig=builders.kubeconfig())
    queue = builders.make_queue("team-a", clusters=[cluster])
    version = builders.make_template("llm")
    job = builders.make_job(version, queue, cluster, phase=GangPhase.RUNNING, user=admin_user)
    GangJob.objects.filter(pk=job.pk).update(owner_uids={"llm-worker": "u-1"}, observed={"pods": [{"name": "p"}]})

    read = job_with_cluster(str(job.uid))
    orm = GangJob.objects.select_related("cluster").get(pk=job.pk)
    fields = [f.attname for f in GangJob._meta.concrete_fields]
    assert {f: getattr(read, f) for f in fields} == {f: getattr(orm, f) for f in fields}
    cluster_fields = [f.attname for f in Cluster._meta.concrete_fields]
    assert {f: getattr(read.cluster, f) for f in cluster_fields} == {f: getattr(orm.cluster, f) for f in cluster_fields}
    assert read.owner_uids == {"llm-worker": "u-1"} and read.phase == GangPhase.RUNNING  # JSON and text converted
    assert read.cluster.kubeconfig == builders.kubeconfig()  # decrypted, as the ORM's field does


@pytest.mark.django_db
def test_a_label_naming_no_job_reads_none():
    assert job_with_cluster(str(uuid.uuid4())) is None
    assert job_with_cluster("not-a-uuid") is None
