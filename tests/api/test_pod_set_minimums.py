"""Issue 30 item 11: per-pod-set minimums are honoured or refused, never dropped. The issue's template: `head` 1 x 1
CPU, `cpu-workers` 4 (minimum 1), `gpu-workers` 2 x 1 GPU (minimum 2). KAI (subGroups[].minMember) and Volcano
(minTaskMember) carry every set's minimum, an optional set's 0 included; k8s-workload (one PodGroup, one
minCount, until Kubernetes' CompositePodGroup in 1.38) and coscheduling (one minMember) refuse it with a 400 naming
the set and the backend, at template write and at submit, and nothing is created."""
import pytest

from scheduling.backends import registry
from scheduling.models import GangJob, RuntimeTemplate, RuntimeTemplateVersion
from scheduling.reconcile import desired
from tests import builders

pytestmark = pytest.mark.django_db
TEMPLATES = "/api/v1/templates/"


def issue_template(backend, name="mixed", cpu_min=1, gpu_min=2, extra_sets=(), **gang):
    sets = [builders.pod_set("head", replicas=1),
            builders.pod_set("cpu-workers", replicas=4, minMember=cpu_min),
            builders.pod_set("gpu-workers", replicas=2, minMember=gpu_min,
                             containers=[builders.container(gpu=1)]), *extra_sets]
    spec = builders.template_spec(backend=backend, pod_sets=[s for s in sets if s is not None],
                                  overridable=["podSets.*.replicas", "minMember"])
    spec["gang"].update(gang)
    return {"name": name, "queue": "team-a", "spec": spec}


REFUSED = [
    # (backend, cpu-workers minimum, words in the refusal)
    ("k8s-workload", 1, "minMember 1, below its 4 replicas"),
    ("k8s-workload", 0, "minMember 0 (an optional set), below its 4 replicas"),
    ("coscheduling", 1, "minMember 1, below its 4 replicas"),
    ("coscheduling", 0, "minMember 0 (an optional set)"),
]


@pytest.mark.parametrize("backend,cpu_min,words", REFUSED, ids=[f"{b}-min{m}" for b, m, _ in REFUSED])
def test_item11_a_pod_set_minimum_below_replicas_is_refused_at_write_naming_the_set_and_backend(api, setup, backend,
                                                                                                cpu_min, words):
    r = api.post(TEMPLATES, issue_template(backend, cpu_min=cpu_min), format="json")
    assert r.status_code == 400, r.data
    message = r.data["spec.podSets[1].minMember"][0]
    assert words in message and "'cpu-workers'" in message and f"'{backend}' backend" in message
    assert not RuntimeTemplate.objects.filter(name="mixed").exists()


def test_item11_k8s_workload_names_compositepodgroup_as_what_it_lacks(api, setup):
    r = api.post(TEMPLATES, issue_template("k8s-workload"), format="json")
    assert "one PodGroup with one minCount" in r.data["spec.podSets[1].minMember"][0]
    assert "CompositePodGroup" in r.data["spec.podSets[1].minMember"][0]


def test_item11_a_stated_set_minimum_under_a_smaller_gang_count_is_refused_on_k8s_workload(api, setup):
    # Every set at its replicas, but the gang's minCount 3 of 7 would let kube-scheduler place it without them.
    body = issue_template("k8s-workload", cpu_min=4, gpu_min=2, minMember=3)
    r = api.post(TEMPLATES, body, format="json")
    assert r.status_code == 400, r.data
    assert "gang's minMember 3 is below the job's 7 pods" in r.data["spec.gang.minMember"][0]


def test_item11_sets_at_their_replicas_or_an_elastic_gang_still_pass_on_k8s_workload(api, setup):
    assert api.post(TEMPLATES, issue_template("k8s-workload", name="whole", cpu_min=4), format="json"
                    ).status_code == 201
    elastic = issue_template("k8s-workload", name="elastic", cpu_min=None, gpu_min=None, minMember=3)
    assert api.post(TEMPLATES, elastic, format="json").status_code == 201


@pytest.mark.parametrize("backend", ["kai", "volcano"])
def test_item11_kai_and_volcano_carry_every_sets_minimum_an_optional_zero_included(api, setup, admin_user, backend):
    _, queue, cluster = setup
    extra = builders.pod_set("eval", replicas=2, minMember=0)
    r = api.post(TEMPLATES, issue_template(backend, extra_sets=[extra]), format="json")
    assert r.status_code == 201, r.data
    job = builders.make_job(RuntimeTemplateVersion.objects.get(template__name="mixed"), queue, cluster,
                            name="mixed-1", user=admin_user)
    spec = desired.gang_spec(job)
    # The gang's minimum is the sum of the sets' (1 + 1 + 2 + 0), not the 9 pods: the optional set stays optional.
    assert spec.min_member == 4
    plugin = registry.newest(backend)()
    assert plugin.set_minimums(plugin.build_gang_objects(spec)) == {"head": 1, "cpu-workers": 1, "gpu-workers": 2,
                                                                     "eval": 0}
    # Volcano's minResources asks for the minimum's pods only: 1 + 1 + 2 (x 1 CPU), 2 GPUs; not the eval set's.
    assert spec.min_resources["cpu"] == "4" and spec.min_resources["nvidia.com/gpu"] == "2"


def test_item11_a_gang_of_only_optional_sets_is_refused(api, setup):
    body = builders.template_spec(backend="kai", pod_sets=[builders.pod_set("a", replicas=2, minMember=0),
                                                           builders.pod_set("b", replicas=1, minMember=0)])
    r = api.post(TEMPLATES, {"name": "none", "queue": "team-a", "spec": body}, format="json")
    assert r.status_code == 400 and "every pod set has minMember 0" in r.data["spec.podSets"][0]


def test_item11_a_replicas_override_that_puts_a_set_below_its_minimum_is_refused_at_submit(api, setup):
    _, queue, cluster = setup
    assert api.post(TEMPLATES, issue_template("k8s-workload", cpu_min=4), format="json").status_code == 201
    body = {"name": "grown", "namespace": "default", "template": "mixed", "queue": queue.name,
            "cluster": cluster.name, "overrides": {"podSets": {"gpu-workers": {"replicas": 3}}}}
    r = api.post("/api/v1/jobs/", body, format="json")
    assert r.status_code == 400, r.data
    message = r.data["overrides.podSets.gpu-workers.replicas"][0]
    assert "'gpu-workers' has minMember 2, below its 3 replicas" in message and "'k8s-workload' backend" in message
    assert not GangJob.objects.filter(name="grown").exists()


def test_item11_a_version_stored_before_the_rule_is_refused_at_submit(api, setup, admin_user):
    _, queue, cluster = setup
    assert api.post(TEMPLATES, issue_template("k8s-workload", cpu_min=4), format="json").status_code == 201
    version = RuntimeTemplateVersion.objects.get(template__name="mixed")
    version.spec["podSets"][1]["minMember"] = 1  # as written before per-set minimums were checked
    RuntimeTemplateVersion.objects.filter(pk=version.pk).update(spec=version.spec)
    body = builders.submit_body(version, queue, cluster, name="old")
    r = api.post("/api/v1/jobs/", body, format="json")
    assert r.status_code == 400, r.data
    assert "'cpu-workers' has minMember 1, below its 4 replicas" in r.data["template_version"][0]
    assert not GangJob.objects.filter(name="old").exists()


def test_item11_the_job_page_shows_the_counts_per_pod_set(client, setup, admin_user):
    _, queue, cluster = setup
    version = builders.make_template("kai-mixed", backend="kai", pod_sets=[
        builders.pod_set("head", replicas=1), builders.pod_set("gpu-workers", replicas=2, minMember=2)])
    job = builders.make_job(version, queue, cluster, name="mixed-2", user=admin_user)
    GangJob.objects.filter(pk=job.pk).update(observed={"pod_counts": {
        "created": 3, "bound": 1, "running": 1, "succeeded": 0, "failed": 0,
        "sets": [{"name": "gpu-workers", "replicas": 2, "minimum": 2, "bound": 0}]}})
    client.force_login(admin_user)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert "gpu-workers 0 of 2 bound" in page
    assert "3 created · 1 bound · 1 running" in page and "[{" not in page
