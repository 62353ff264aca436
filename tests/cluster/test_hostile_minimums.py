"""Issue 30 items 8, 9 and 11 against the real control plane (1.37.2 by default; the tests that read the gang API
run on 1.36.3 too, under the `k8s_version` marker's variant): a queue edit that would strand a running job is
refused and its Queue stays in the cluster; a pending job behind a cancelled job whose pods linger reads without a
500; per-pod-set minimums are refused where the backend cannot express them, carried where it can (an optional
set's 0 included), and counted per set."""
from __future__ import annotations

import contextlib
import uuid

import pytest
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

from scheduling.choices import GangPhase
from scheduling.constants import LABEL_INSTANCE, LABEL_JOB_UID
from scheduling.kube import objects
from scheduling.kube.objects import POD
from scheduling.models import Cluster, GangJob, QueuePolicy, RuntimeTemplate
from scheduling.observe.capacity import summarize
from scheduling.reconcile import queues as queue_sync
from scheduling.services.jobs import lifecycle as job_service
from tests import builders

from .conftest import POOL_LABEL
from .reconcile_support import wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.django_db]
HOLD = "gangweb.test/hold"  # a finalizer of the test's own, keeping pods after their Job is gone


def kai_queue(world, name: str) -> dict | None:
    try:
        return k8s.CustomObjectsApi(world.api).get_cluster_custom_object(
            queue_sync.GROUP, queue_sync.VERSION, queue_sync.PLURAL, name)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def delete_queues(world, names, instance: str) -> None:
    """Delete the KAI and Volcano Queues `names` that carry this test's instance label."""
    api = k8s.CustomObjectsApi(world.api)
    for group, version in ((queue_sync.GROUP, queue_sync.VERSION), ("scheduling.volcano.sh", "v1beta1")):
        for name in names:
            try:
                found = api.get_cluster_custom_object(group, version, queue_sync.PLURAL, name)
                if (found["metadata"].get("labels") or {}).get(LABEL_INSTANCE) == instance:
                    api.delete_cluster_custom_object(group, version, queue_sync.PLURAL, name)
            except ApiException as exc:
                assert exc.status == 404


def pods_of(world, job) -> list[dict]:
    return objects.list_objects(world.api, POD, world.namespace, f"{LABEL_JOB_UID}={job.uid}")


def pool_node(kube_cluster, namespace: str, gpus: int) -> str:
    name = f"{namespace[:40]}-n{uuid.uuid4().hex[:4]}"
    kube_cluster.add_node(name, gpus=gpus, labels={POOL_LABEL: namespace})
    return name


# --- item 8 ------------------------------------------------------------------------------------------------------

def test_item8_a_queue_edit_that_would_strand_a_running_job_is_refused_and_its_kai_queue_stays(world, api, settings):
    instance = settings.GANGWEB_INSTANCE = "gangweb-hostile-minimums"  # its own Queues: others' are never touched
    name = f"hm-{uuid.uuid4().hex[:6]}"
    Cluster.objects.create(name="other")
    try:
        r = api.post("/api/v1/queues/", {"name": name, "clusters": ["local"], "allowed_namespaces": [world.namespace]},
                     format="json")
        assert r.status_code == 201, r.data
        queue_sync.sync_cluster(world.cluster)
        before = wait_for(lambda: kai_queue(world, name), 30, f"KAI Queue {name}")
        job = world.submit(queue=name, replicas=1)
        GangJob.objects.filter(pk=job.pk).update(phase=GangPhase.RUNNING)

        moved = api.patch(f"/api/v1/queues/{name}/", {"clusters": ["other"]}, format="json")
        assert moved.status_code == 409, moved.data
        assert f"{world.namespace}/{job.name}" in moved.data["clusters"][0]
        narrowed = api.patch(f"/api/v1/queues/{name}/", {"allowed_namespaces": ["elsewhere"]}, format="json")
        assert narrowed.status_code == 409, narrowed.data
        assert f"{world.namespace}/{job.name}" in narrowed.data["allowed_namespaces"][0]

        policy = QueuePolicy.objects.get(name=name)
        assert list(policy.clusters.values_list("name", flat=True)) == ["local"]
        assert policy.allowed_namespaces == [world.namespace]
        queue_sync.sync_cluster(world.cluster)  # what the edit would have queued: the Queue is still wanted here
        after = kai_queue(world, name)
        assert after is not None and after["metadata"]["uid"] == before["metadata"]["uid"]
        assert after["metadata"].get("deletionTimestamp") is None
    finally:
        delete_queues(world, [name, "team-a", "team-b"], instance)


# --- item 9 ------------------------------------------------------------------------------------------------------

@contextlib.contextmanager
def lingering(world, admin_user, kube_cluster):
    """The issue's reproduction: queue gpu-4 (a 4-GPU limit); job-a (4 x 1 GPU, a template with no finished run)
    Running on a pool node, a finalizer of the test's own on its pods, then cancelled (its pods stay); job-b (4 GPUs)
    submitted to the same queue. Yields job-b while job-a's pods remain; releases them after."""
    node = pool_node(kube_cluster, world.namespace, gpus=8)
    held: list[str] = []
    try:
        builders.make_queue("gpu-4", allowed_namespaces=[world.namespace], gpu_limit=4)
        gpu = [builders.container(cpu="100m", memory="128Mi", gpu=1)]
        a = world.submit(queue="gpu-4", replicas=4, name="job-a", containers=gpu,
                         node_selector={POOL_LABEL: world.namespace})
        world.reconcile(a)
        wait_for(lambda: [p.get("status", {}).get("phase") for p in pods_of(world, a)] == ["Running"] * 4, 120,
                 "job-a's 4 pods Running")
        world.reconcile(a)
        a.refresh_from_db()
        assert a.phase == GangPhase.RUNNING
        for pod in pods_of(world, a):  # a finalizer keeps the pods after the job's objects are deleted
            held.append(pod["metadata"]["name"])
            objects.merge_patch(world.api, POD, world.namespace, pod["metadata"]["name"],
                                {"metadata": {"finalizers": [HOLD]}})
        job_service.cancel(admin_user, a)
        world.reconcile(a)
        a.refresh_from_db()
        assert a.phase == GangPhase.RUNNING and a.desired_state == "Cancel" and pods_of(world, a)
        # The capacity the cluster watcher writes (not running in this test): its Ready nodes' allocatable.
        Cluster.objects.filter(pk=world.cluster.pk).update(capacity=summarize(client_nodes(world)))
        yield world.submit(queue="gpu-4", replicas=4, name="job-b", containers=gpu,
                           node_selector={POOL_LABEL: world.namespace})
    finally:
        for name in held:
            try:
                objects.merge_patch(world.api, POD, world.namespace, name, {"metadata": {"finalizers": None}})
            except ApiException as exc:
                assert exc.status == 404
        kube_cluster.remove_node(node, wait=False)


def test_item9_a_pending_job_behind_a_cancelled_job_with_lingering_pods_reads_without_500(world, api, admin_user,
                                                                                          kube_cluster, client):
    with lingering(world, admin_user, kube_cluster) as b:
        detail = api.get(f"/api/v1/jobs/{b.pk}/")
        assert detail.status_code == 200
        assert detail.data["estimated_start"]["status"] in ("estimated", "now", "unknown")
        assert detail.data["estimated_start"]["text"]
        estimate = api.get(f"/api/v1/jobs/{b.pk}/estimate/")
        assert estimate.status_code == 200 and estimate.data["name"] == "job-b"
        client.force_login(admin_user)
        page = client.get(f"/jobs/{b.pk}/")
        assert page.status_code == 200 and b"job-b" in page.content


@pytest.mark.django_db(transaction=True)  # the live server reads the test's rows from another process
def test_item9_gangweb_get_and_why_answer_for_that_pending_job(world, admin_user, kube_cluster, tmp_path):
    from tests.cli import support

    with lingering(world, admin_user, kube_cluster) as b:
        (tmp_path / "server").mkdir()
        server = support.Server(tmp_path / "server")
        try:
            env = support.cli_env(server.url, builders.make_token(admin_user, ["read"]), tmp_path)
            got = support.run_cli(["get", str(b.pk)], env)
            assert got.returncode == 0, got.stderr
            assert "job-b" in got.stdout
            why = support.run_cli(["why", str(b.pk)], env)
            assert why.returncode == 0, why.stderr
            assert "estimated start:" in why.stdout
        finally:
            server.stop()


def client_nodes(world) -> list[dict]:
    return [world.api.sanitize_for_serialization(n) for n in k8s.CoreV1Api(world.api).list_node().items]


# --- item 11 -----------------------------------------------------------------------------------------------------

def issue_template(backend: str, namespace: str, cpu_min=1, gpu_min=2, optional=None, **gang) -> dict:
    """The issue's template: head 1 x 1 CPU, cpu-workers 4 (minimum 1), gpu-workers 2 x 1 GPU (minimum 2), on the
    test's pool nodes; `optional`: one more set of that many replicas with minimum 0."""
    selector = {POOL_LABEL: namespace}
    small = builders.container(cpu="1", memory="256Mi")
    sets = [builders.pod_set("head", replicas=1, containers=[small]),
            builders.pod_set("cpu-workers", replicas=4, minMember=cpu_min, containers=[small]),
            builders.pod_set("gpu-workers", replicas=2, minMember=gpu_min,
                             containers=[builders.container(cpu="1", memory="256Mi", gpu=1)])]
    if optional:
        sets.append(builders.pod_set("eval", replicas=optional, minMember=0, containers=[small]))
    for ps in sets:
        ps["template"]["spec"]["nodeSelector"] = selector
    spec = builders.template_spec(backend=backend, pod_sets=sets)
    spec["gang"].update(gang)
    return spec


def test_item11_a_pod_set_minimum_below_replicas_is_refused_on_k8s_workload(world, api):
    body = {"name": "mixed", "queue": "team-a", "spec": issue_template("k8s-workload", world.namespace)}
    r = api.post("/api/v1/templates/", body, format="json")
    assert r.status_code == 400, r.data
    message = r.data["spec.podSets[1].minMember"][0]
    assert "'cpu-workers'" in message and "'k8s-workload' backend" in message and "CompositePodGroup" in message
    assert not RuntimeTemplate.objects.filter(name="mixed").exists()
    for ref in world.k8s.gang_kinds:
        assert objects.list_objects(world.api, ref, world.namespace, "") == []


def test_item11_a_kai_optional_pod_set_reaches_the_podgroup_with_minimum_0(world):
    version = template_service_create("kai", world.namespace, optional=2)
    job = submit(world, version, "kai-optional")
    world.reconcile(job)
    backend = world.backend(job)
    [pg] = world.gang(job, backend.POD_GROUP)
    assert pg["spec"]["subGroups"] == [{"name": "head", "minMember": 1}, {"name": "cpu-workers", "minMember": 1},
                                       {"name": "gpu-workers", "minMember": 2}, {"name": "eval", "minMember": 0}]
    assert pg["spec"]["minMember"] == 4  # the sets' minimums, not the 9 pods: the optional set stays optional


def test_item11_a_volcano_optional_pod_set_reaches_the_podgroup_with_minimum_0(world):
    version = template_service_create("volcano", world.namespace, optional=2)
    job = submit(world, version, "volcano-optional")
    world.reconcile(job)
    [pg] = world.gang(job, world.backend(job).POD_GROUP)
    assert pg["spec"]["minTaskMember"] == {"head": 1, "cpu-workers": 1, "gpu-workers": 2, "eval": 0}
    assert pg["spec"]["minMember"] == 4


def template_service_create(backend: str, namespace: str, **kw):
    from scheduling.services.templates import versions as template_versions

    return template_versions.create_template(None, f"t-{uuid.uuid4().hex[:8]}", "", issue_template(backend, namespace,
                                                                                                   **kw))


def submit(world, version, name: str) -> GangJob:
    body = builders.submit_body(version, QueuePolicy.objects.get(name="team-a"), world.cluster, name=name,
                                namespace=world.namespace)
    job, _ = job_service.submit(world.user, body)
    return GangJob.objects.select_related("cluster", "queue").get(pk=job.pk)


def _counts_per_set(world, kube_cluster):
    """The issue's gang on k8s-workload, as a job submitted before per-set minimums were checked keeps it (its
    resolved spec holds them; gangweb's one PodGroup has minCount 3): on a pool node with CPU and no GPU,
    kube-scheduler places head and the 4 CPU workers, none of the GPU workers. gangweb must not call that
    Scheduled ("5 of 3 bound"): it reads Queued, "gpu-workers 0 of 2 bound"."""
    node = pool_node(kube_cluster, world.namespace, gpus=0)
    try:
        version = template_service_create("k8s-workload", world.namespace, cpu_min=None, gpu_min=None, minMember=3)
        job = submit(world, version, "mixed")
        spec = job.resolved_spec
        spec["podSets"][1]["minMember"], spec["podSets"][2]["minMember"] = 1, 2  # as stored before the rule
        GangJob.objects.filter(pk=job.pk).update(resolved_spec=spec)
        world.reconcile(job)

        def five_bound():
            pods = pods_of(world, job)
            return len(pods) == 7 and sum(1 for p in pods if p["spec"].get("nodeName")) == 5

        wait_for(five_bound, 120, "head and the 4 CPU workers bound")
        world.reconcile(job)
        job.refresh_from_db()
        assert job.phase != GangPhase.SCHEDULED and job.phase != GangPhase.RUNNING
        assert "gpu-workers 0 of 2 bound" in job.phase_message
        assert job.observed["pod_counts"]["bound"] == 5
        assert {s["name"]: (s["bound"], s["minimum"]) for s in job.observed["pod_counts"]["sets"]} == {
            "cpu-workers": (4, 1), "gpu-workers": (0, 2)}
        assert "gpu-workers 0 of 2 bound" in job.why_pending["summary"]
    finally:
        kube_cluster.remove_node(node, wait=False)


def test_item11_a_gang_with_a_pod_set_below_its_minimum_is_not_called_scheduled(world, kube_cluster):
    _counts_per_set(world, kube_cluster)


@pytest.mark.k8s_version("1.36")
def test_item11_a_gang_with_a_pod_set_below_its_minimum_is_not_called_scheduled_on_v1alpha2(world, kube_cluster):
    _counts_per_set(world, kube_cluster)
