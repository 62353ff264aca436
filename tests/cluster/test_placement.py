"""Placement and moves across two real control planes (issue 38; docs/queues.md, "Where a job runs"): a job with no
cluster goes where it fits; a job waiting on a full cluster moves once the other frees up, its objects deleted there
first; a frozen cluster's waiting jobs go to the other and nothing of them remains on it once it answers again; a
bulk of 200 spreads without putting a cluster over its capacity while the other has room.

Two control planes of this module's own (no fake nodes at start: each test adds the nodes it needs, labelled for
it); the reconcile passes, the moves' rounds and the probes run in this process, as the tasks would run them.
Nothing depends on timing: every wait polls a condition with a generous bound."""
from __future__ import annotations

import os
import signal
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from kubernetes import client

import localcluster
from scheduling.constants import LABEL_JOB_UID
from scheduling.kube import client as kube_client
from scheduling.kube import objects
from scheduling.kube.refs import JOB, NODE, POD
from scheduling.models import Cluster, GangJob, StrandedObjects
from scheduling.observe import capacity
from scheduling.reconcile import jobs, moves, ownership, probe, resync, stranded
from scheduling.services.jobs import lifecycle as job_service
from tests import builders

from .reconcile_support import k8s_workload, wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.django_db]
POOL = "gangweb.io/test-pool"


@pytest.fixture(scope="module")
def planes(local_binaries, tmp_path_factory):
    """Two control planes of the default release, no nodes; stopped after the module."""
    started = []
    try:
        for name in ("c1", "c2"):
            state_dir = tmp_path_factory.mktemp(f"place-{name}")
            started.append((state_dir, localcluster.up(localcluster.ClusterConfig(state_dir=state_dir, nodes=0,
                                                                                  die_with_parent=True))))
        yield {name: lc for name, (_, lc) in zip(("c1", "c2"), started, strict=True)}
    finally:
        for state_dir, _ in started:
            localcluster.down(state_dir)


class Two:
    """The test's gangweb side: Cluster rows c1 and c2 (probed), a queue over both allowing the test's namespace,
    the admin; helpers to add nodes, record capacity as the watcher would, submit and drive passes."""

    def __init__(self, planes, user):
        self.planes, self.user = planes, user
        self.ns = f"t-place-{uuid.uuid4().hex[:6]}"
        self.rows, self.apis, self.nodes = {}, {}, []
        for name, lc in planes.items():
            with lc.api_client() as api:
                client.CoreV1Api(api).create_namespace({"metadata": {"name": self.ns}})
            row = Cluster.objects.create(name=name, kubeconfig=Path(lc.kubeconfig).read_text())
            probe.probe_cluster(row)
            row.refresh_from_db()
            assert row.health == "Healthy", row.health_message
            self.rows[name], self.apis[name] = row, kube_client.api_client(row)
        self.queue = builders.make_queue("team-a", clusters=list(self.rows.values()), allowed_namespaces=[self.ns])
        self.templates = {}

    def add_nodes(self, name: str, count: int, gpus: int) -> None:
        for _ in range(count):
            node = f"{self.ns}-{name}-n{len(self.nodes)}"
            self.planes[name].add_node(node, gpus=gpus, labels={POOL: self.ns})
            self.nodes.append((name, node))
        self.record_capacity(name)

    def record_capacity(self, name: str) -> None:
        """What the cluster watcher records when nodes change (`Cluster.capacity`), for this test's nodes only."""
        nodes = [n for n in objects.list_objects(self.apis[name], NODE, None, f"{POOL}={self.ns}")]
        Cluster.objects.filter(pk=self.rows[name].pk).update(capacity=capacity.summarize(nodes))

    def template(self, gpus_per_pod: int, pods: int):
        key = (gpus_per_pod, pods)
        if key not in self.templates:
            spec = builders.pod_set("worker", replicas=pods, containers=[builders.container(
                cpu="1", memory="1Gi", gpu=str(gpus_per_pod))])
            spec["template"]["spec"]["nodeSelector"] = {POOL: self.ns}
            self.templates[key] = builders.make_template(name=f"t-{uuid.uuid4().hex[:8]}", pod_sets=[spec])
        return self.templates[key]

    def body(self, name: str, gpus_per_pod: int = 2, pods: int = 2, **extra) -> dict:
        version = self.template(gpus_per_pod, pods)
        return {"name": name, "namespace": self.ns, "template": version.template.name, "queue": "team-a", **extra}

    def submit(self, name: str, **kwargs) -> GangJob:
        job, _ = job_service.submit(self.user, self.body(name, **kwargs))
        return job

    def run(self, job: GangJob) -> GangJob:
        """One pass over the job on its cluster as it is now (as its task would run it)."""
        fresh = GangJob.objects.select_related("cluster", "queue").get(pk=job.pk)
        result = jobs.run_pass(fresh, raise_transient=False)
        assert result.error is None or result.transient, result.message
        return GangJob.objects.select_related("cluster").get(pk=job.pk)

    def until(self, job: GangJob, predicate, what: str, timeout: float = 180) -> GangJob:
        return wait_for(lambda: (lambda j: predicate(j) and j)(self.run(job)), timeout, what, interval=1)

    def of_job(self, name: str, job: GangJob, ref) -> list[dict]:
        return objects.list_objects(self.apis[name], ref, self.ns, f"{LABEL_JOB_UID}={job.uid}")

    def gang_objects(self, name: str, job: GangJob) -> list[dict]:
        """Every object of the job in cluster `name`: its gang kinds, Jobs and pods."""
        kinds = k8s_workload(self.rows[name]).gang_kinds
        return [o for ref in (*kinds, JOB, POD) for o in self.of_job(name, job, ref)]

    def close(self):
        for name, node in self.nodes:
            self.planes[name].remove_node(node, wait=False)
        for lc in self.planes.values():
            with lc.api_client() as api:
                try:
                    client.CoreV1Api(api).delete_namespace(self.ns)
                except client.ApiException:
                    pass


@pytest.fixture
def two(planes, admin_user, enqueued, settings):
    settings.GANGWEB_PLACEMENT_STALE_SECONDS = 3600  # probed once at the start: the numbers stay usable
    world = Two(planes, admin_user)
    yield world
    world.close()


def running(job: GangJob) -> bool:
    return job.phase == "Running"


def test_a_job_with_no_cluster_goes_to_the_one_where_it_fits(two):
    two.add_nodes("c1", 1, gpus=4)
    two.add_nodes("c2", 1, gpus=8)
    half = two.submit("half", gpus_per_pod=1, cluster="c1")  # 2 of c1's 4 GPUs
    two.until(half, running, "the first job Running on c1")
    job = two.submit("fits")  # 2 pods x 2 GPUs
    assert job.cluster.name == "c2"
    assert job.placement["text"] == "placed on c2: 8 GPUs free; c1 has 2 GPUs free"
    job = two.until(job, running, "the job Running on c2")
    assert job.cluster.name == "c2"
    assert two.gang_objects("c1", job) == []
    assert len(two.of_job("c2", job, POD)) == 2


def test_a_job_waiting_on_a_full_cluster_moves_once_the_other_frees_up(two):
    two.queue.move_after_seconds = 30
    two.queue.save()
    two.add_nodes("c1", 1, gpus=4)
    two.add_nodes("c2", 1, gpus=8)
    filler = two.submit("filler", cluster="c1")  # c1 full
    blocker = two.submit("blocker", gpus_per_pod=4, cluster="c2")  # c2 full
    two.until(filler, running, "the filler Running on c1")
    two.until(blocker, running, "the blocker Running on c2")
    waiter = two.submit("waiter")  # fits nowhere: the least waiting for its size is c2 (0.5 of it, c1 1.0)
    assert waiter.cluster.name == "c2" and waiter.placement["rule"] == "earliest"
    waiter = two.until(waiter, lambda j: j.phase == "Queued", "the waiter Queued on c2")
    assert moves.decide()["claimed"] == 0  # c1 is still full
    job_service.cancel(two.user, GangJob.objects.get(pk=filler.pk))
    two.until(filler, lambda j: j.phase == "Cancelled", "the filler gone from c1")

    def moved():
        moves.decide()  # the beat's round, every resync period
        job = two.run(waiter)  # the pass its claim queues, on the cluster it leaves, then on the new one
        return job.cluster.name == "c1" and job
    job = wait_for(moved, 180, "the waiter moved to c1", interval=2)
    waited = (job.placement["moves"][0]["at"], job.created_at)
    assert job.placement["moves"][0]["text"].startswith("moved from c2 to c1 after ")
    assert int(job.placement["moves"][0]["text"].split("after ")[1].split(" s")[0]) >= 30, waited
    job = two.until(job, running, "the waiter Running on c1")
    assert two.gang_objects("c2", job) == []  # none left on the first cluster
    roots = two.of_job("c1", job, k8s_workload(two.rows["c1"]).gang_kinds[0])
    assert len(roots) == 1 and len(two.of_job("c1", job, POD)) == 2  # exactly one gang object set
    attempts = sorted({(t.attempt, t.phase, t.reason) for t in job.transitions.all() if t.phase == "Submitted"})
    assert attempts == [(0, "Submitted", "Placed"), (1, "Submitted", "Moved")]


def test_a_frozen_clusters_waiting_jobs_go_to_the_other_and_nothing_of_them_stays_after_it_resumes(two, planes,
                                                                                                   settings):
    settings.GANGWEB_CLUSTER_LOST_SECONDS = 5
    two.add_nodes("c1", 1, gpus=4)
    two.add_nodes("c2", 1, gpus=4)
    blocker = two.submit("blocker", cluster="c1")
    two.until(blocker, running, "the blocker Running on c1")
    other = two.submit("c2-filler", cluster="c2")
    two.until(other, running, "the c2 filler Running on c2")
    waiter = two.submit("waiter", cluster=["c1"])  # placed on c1, among c1 alone, so it waits there
    waiter = two.until(waiter, lambda j: j.phase == "Queued", "the waiter Queued on c1")
    GangJob.objects.filter(pk=waiter.pk).update(placement={**waiter.placement, "among": None})  # may go anywhere
    job_service.cancel(two.user, GangJob.objects.get(pk=other.pk))
    two.until(other, lambda j: j.phase == "Cancelled", "c2 freed")
    assert two.gang_objects("c1", waiter)  # its objects are on c1
    apiserver = next(p.pid for p in planes["c1"].state.processes if p.name == "kube-apiserver")
    os.kill(apiserver, signal.SIGSTOP)
    try:
        def lost():
            row = probe.probe_cluster(Cluster.objects.get(name="c1"))
            return row.health == "Unreachable" and row
        wait_for(lost, 180, "c1 unreachable at its probe", interval=1)

        def moved_away():
            moves.decide()
            job = GangJob.objects.select_related("cluster").get(pk=waiter.pk)
            return job.cluster.name == "c2" and job
        job = wait_for(moved_away, 120, "the waiter moved to c2", interval=1)
        assert job.phase_message.startswith("moved from c1 to c2: c1 has been unreachable for ")
        blocker.refresh_from_db()
        assert (blocker.cluster.name, blocker.phase_reason) == ("c1", "ClusterLost")  # reported, not moved
        job = two.until(job, running, "the waiter Running on c2")
    finally:
        os.kill(apiserver, signal.SIGCONT)
    wait_for(lambda: probe.probe_cluster(Cluster.objects.get(name="c1")).health == "Healthy", 120, "c1 back")

    def nothing_left_on_c1():
        resync.resync_cluster(Cluster.objects.get(name="c1"))  # stranded objects go first
        closed = StrandedObjects.objects.get(job_id=job.pk).deleted_at is not None  # its own LIST found none
        return closed and not two.gang_objects("c1", job)
    wait_for(nothing_left_on_c1, 180, "the waiter's objects gone from c1", interval=2)
    job = two.run(job)
    assert (job.cluster.name, job.phase) == ("c2", "Running")
    assert len(two.of_job("c2", job, POD)) == 2 and two.gang_objects("c1", job) == []
    blocker = two.run(blocker)  # c1 answers again: its running job reads its phase again
    assert blocker.phase == "Running" and blocker.phase_reason != "ClusterLost"


def test_a_bulk_of_200_spreads_without_overfilling_a_cluster_while_the_other_has_room(two):
    two.add_nodes("c1", 2, gpus=8)  # 16 GPUs
    two.add_nodes("c2", 1, gpus=8)  # 8 GPUs
    bodies = [two.body(f"b-{i}", gpus_per_pod=1, pods=1) for i in range(200)]
    made = job_service.submit_many(two.user, bodies)
    assert len(made) == 200
    placed = {"c1": 0, "c2": 0}
    over_while_room = []
    for job in made:  # request order is placement order
        name = job.placement["cluster"]
        free = {c["cluster"]: c["free"]["gpu"] for c in job.placement["clusters"]}
        if free[name] < 1 and free["c2" if name == "c1" else "c1"] >= 1:
            over_while_room.append(job.name)
        placed[name] += 1
    assert over_while_room == []
    assert [j.placement["rule"] for j in made].count("fits") == 24  # exactly the room of both
    assert placed == {"c1": 133, "c2": 67} or abs(placed["c1"] - 2 * placed["c2"]) <= 3, placed


def labelled_job(name: str, ns: str, job_uid, mark: bool) -> dict:
    """A suspended batch/v1 Job carrying the job's label, with gangweb's creation mark for it when `mark`."""
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": name, "namespace": ns, "labels": {LABEL_JOB_UID: str(job_uid)}},
           "spec": {"suspend": True, "template": {"spec": {"restartPolicy": "Never", "containers": [
               {"name": "c", "image": "registry.example/x:1"}]}}}}
    return ownership.stamp(job, str(job_uid)) if mark else job


def test_a_returning_cluster_loses_what_gangweb_made_there_and_keeps_what_others_made(two):
    """A lost cluster's moved job left: its recorded objects; a Job gangweb made whose UID it never learnt (the
    create's answer lost as the cluster went away: gangweb's creation mark, nothing recorded); a Job someone else
    made under the name of a recorded one (the job's label, another UID); a Job with the job's label and mark in
    another namespace. The cleanup deletes the first two only (before, the unrecorded one stayed and the row
    closed as "nothing left")."""
    two.add_nodes("c1", 1, gpus=4)
    blocker = two.submit("blocker", cluster="c1")
    two.until(blocker, running, "the blocker Running on c1")
    waiter = two.until(two.submit("waiter", cluster="c1"), lambda j: j.phase == "Queued", "the waiter Queued on c1")
    api, batch = two.apis["c1"], client.BatchV1Api(two.apis["c1"])
    replaced = two.of_job("c1", waiter, JOB)[0]["metadata"]["name"]
    batch.delete_namespaced_job(replaced, two.ns, propagation_policy="Foreground")
    wait_for(lambda: replaced not in {o["metadata"]["name"] for o in two.of_job("c1", waiter, JOB)}, 120,
             "the recorded Job gone")
    theirs = batch.create_namespaced_job(two.ns, labelled_job(replaced, two.ns, waiter.uid, mark=False))
    batch.create_namespaced_job(two.ns, labelled_job("waiter-lost-answer", two.ns, waiter.uid, mark=True))
    other_ns = f"{two.ns}-other"
    client.CoreV1Api(api).create_namespace({"metadata": {"name": other_ns}})
    try:
        elsewhere = batch.create_namespaced_job(other_ns, labelled_job("waiter-x", other_ns, waiter.uid, mark=True))
        # gangweb's probe has not reached c1 for an hour (the objects above were left as it went away)
        Cluster.objects.filter(name="c1").update(unreachable_since=timezone.now() - timedelta(hours=1))
        job = GangJob.objects.select_related("cluster").get(pk=waiter.pk)
        assert moves.switch(job, two.rows["c2"], "moved from c1 to c2: c1 has been unreachable", stranded=True)
        wait_for(lambda: stranded.clean(Cluster.objects.get(name="c1"), api) == 0, 120, "the stranded row closed")
        left = {(o["metadata"]["namespace"], o["metadata"]["name"], o["metadata"]["uid"])
                for o in objects.list_objects(api, JOB, None, f"{LABEL_JOB_UID}={waiter.uid}")}
        assert left == {(two.ns, replaced, theirs.metadata.uid), (other_ns, "waiter-x", elsewhere.metadata.uid)}
        assert [o for o in two.gang_objects("c1", waiter) if o["kind"] != "Job"] == []
    finally:
        client.CoreV1Api(api).delete_namespace(other_ns)
