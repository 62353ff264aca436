"""The documented examples work as written on `make run`'s local cluster: the README's first job, and the queue and
template examples of docs/api.md, their three request bodies posted in order as the page posts them (a queue, a
template as a platform admin, then a job of it to the new queue on cluster "local"), in a world set up as `make run`
sets it up (services/clusters/local.py)."""
import json
import re
from pathlib import Path

import pytest

from scheduling.models import GangJob, QueuePolicy
from scheduling.services.clusters import local as local_cluster
from tests import builders

pytestmark = pytest.mark.django_db
REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
API_DOC = REPO / "docs" / "api.md"


def readme_bodies(marker: str, page: Path = API_DOC, loop: str = "") -> list[tuple[str, dict]]:
    """[(path, JSON body)] of the curl POSTs in the page's bash block that contains `marker`; `loop`: the value of a
    shell loop's `$i` spliced into the body (`'$i'`)."""
    blocks = re.findall(r"```bash\n(.*?)```", page.read_text(), re.S)
    (block,) = [b for b in blocks if marker in b]
    block = block.replace("'$i'", loop)
    # A POST without a body (a cancel) is not followed into the next one's: the gap may not hold another POST.
    found = re.findall(r"-X POST \$GW(/\S+) (?:(?!-X POST).)*?-d '(.*?)'", block, re.S)
    return [(path, json.loads(body)) for path, body in found]


@pytest.fixture
def local_world():
    """Cluster "local", queue "default" and its namespace, as `make run` registers them."""
    local = builders.make_cluster(local_cluster.LOCAL_CLUSTER)
    builders.make_queue(local_cluster.DEFAULT_QUEUE, clusters=[local],
                        allowed_namespaces=[local_cluster.SAMPLE_NAMESPACE])
    return local


def test_the_queue_template_and_job_examples_run_in_order_on_the_local_cluster(api, enqueued, local_world):
    [(queue_path, queue)] = readme_bodies('"name": "team-a"')
    (template_path, template), (job_path, job) = readme_bodies('"name": "ddp"')
    assert (queue_path, template_path, job_path) == ("/api/v1/queues/", "/api/v1/templates/", "/api/v1/jobs/")

    r = api.post(queue_path, queue, format="json")
    assert r.status_code == 201, r.data
    # Its jobs run in a namespace the local cluster has (the README's team-a once named "team-a", which it lacks).
    assert QueuePolicy.objects.get(name="team-a").allowed_namespaces == [local_cluster.SAMPLE_NAMESPACE]

    r = api.post(template_path, template, format="json")
    assert r.status_code == 201, r.data
    assert r.data["latest_version"] == 1
    r = api.post(job_path, job, format="json")
    assert r.status_code == 201, r.data
    assert r.data["warnings"] == []
    created = GangJob.objects.get(pk=r.data["id"])
    assert (created.template_version.template.name, created.queue.name, created.namespace,
            created.resolved_spec["podSets"][0]["replicas"]) == ("ddp", "team-a", "default", 4)
    # It ends on the local cluster (kwok's sim-duration stage), so estimates behind it are not all unknown.
    annotations = created.resolved_spec["podSets"][0]["template"]["metadata"]["annotations"]
    assert annotations == {"gangweb.io/sim-duration": "10m"}


def test_the_readme_says_who_enforces_queue_limits_and_that_the_local_cluster_runs_kueue_only():
    text = " ".join(README.read_text().split())
    assert "quota and limit are enforced by the backend's queue manager: KAI, Volcano or Kueue" in text
    assert "The local cluster runs Kueue, so there the quota and limit of a Kueue-backed queue are enforced" in text
    assert "It does not run KAI or Volcano, so there the jobs of a KAI- or Volcano-backed queue may" in text


def test_the_readmes_kueue_job_is_accepted_into_the_demo_queue_make_run_installs(api, enqueued, local_world):
    """The README's Kueue curl POST, as written, against the queue and template `ensure_kueue_demo` installs: a
    4-GPU job of backend family kueue into kueue-demo (quota 4, limit 8) under kueue-pool (8)."""
    leaf = local_cluster.ensure_kueue_demo(local_world)
    assert (leaf.parent.name, leaf.gpu_quota, leaf.gpu_limit, leaf.parent.gpu_quota) == ("kueue-pool", 4, 8, 8)
    assert leaf.allowed_namespaces == leaf.parent.allowed_namespaces == [local_cluster.SAMPLE_NAMESPACE]
    assert list(leaf.clusters.all()) == list(leaf.parent.clusters.all()) == [local_world]
    assert local_cluster.ensure_kueue_demo(local_world) == leaf  # again: nothing new
    ids = []
    for i in ("1", "2", "3"):  # the README's loop: three jobs, each its own name
        [(path, body)] = readme_bodies('"name": "hello-kueue-', README, loop=i)
        r = api.post(path, body, format="json")
        assert r.status_code == 201, r.data
        ids.append(r.data["id"])
    assert sorted(GangJob.objects.filter(pk__in=ids).values_list("name", flat=True)) == [
        "hello-kueue-1", "hello-kueue-2", "hello-kueue-3"]
    job = GangJob.objects.get(pk=ids[0])
    assert (job.template_version.template.name, job.queue.name, job.namespace) == ("sample-kueue", "kueue-demo",
                                                                                    "default")
    assert job.resolved_spec["backend"] == "kueue"
    assert [(ps["name"], ps["replicas"]) for ps in job.resolved_spec["podSets"]] == [("launcher", 1), ("worker", 3)]


def test_the_schema_needs_a_login_and_the_readme_says_so(client, db):
    """A new user opened /api/schema/ in a browser, got 401 and found nothing about it in the README."""
    assert client.get("/api/schema/").status_code == 401
    assert client.get("/api/docs/").status_code in (401, 403)
    text = " ".join(README.read_text().split())
    assert ("`/api/schema/` (OpenAPI 3; YAML, or JSON with `?format=json`), browsable at `/api/docs/`: both need a "
            "login as the API does") in text


def test_the_readmes_first_job_is_accepted_on_the_local_cluster(api, enqueued, local_world):
    """The README's first curl POST, as written, against the template and queue `make run` installs."""
    from scheduling.services.templates import versions as template_versions

    template_versions.create_template(None, local_cluster.SAMPLE_TEMPLATE, "sample", local_cluster.SAMPLE_SPEC)
    template_versions.create_template(None, local_cluster.SAMPLE_FAIL_TEMPLATE, "fails",
                                      local_cluster.SAMPLE_FAIL_SPEC)
    [(path, body), (fail_path, fail_body)] = readme_bodies('"name": "hello"', README)
    r = api.post(path, body, format="json")
    assert r.status_code == 201, r.data
    job = GangJob.objects.get(pk=r.data["id"])
    assert (job.name, job.queue.name, job.cluster.name, job.namespace) == ("hello", "default", "local", "default")
    # The README's failing job: the same gang, whose pods exit with code 3 after 20 s (localcluster's stage).
    r = api.post(fail_path, fail_body, format="json")
    assert r.status_code == 201, r.data
    failing = GangJob.objects.get(pk=r.data["id"])
    assert (failing.name, failing.template_version.template.name) == ("oops", "sample-fails")
    annotations = failing.resolved_spec["podSets"][0]["template"]["metadata"]["annotations"]
    assert annotations == {"gangweb.io/sim-duration": "20s", "gangweb.io/sim-exit": "3"}
