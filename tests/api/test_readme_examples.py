"""The README's template example works as written: its two request bodies, posted as the README posts them (the
template as a platform admin, then a job of it to queue "default" on cluster "local", as `make run` sets up)."""
import json
import re
from pathlib import Path

import pytest

from scheduling.models import GangJob
from tests import builders

pytestmark = pytest.mark.django_db
README = Path(__file__).resolve().parents[2] / "README.md"


def readme_bodies(marker: str) -> list[tuple[str, dict]]:
    """[(path, JSON body)] of the curl POSTs in the README's bash block that contains `marker`."""
    blocks = re.findall(r"```bash\n(.*?)```", README.read_text(), re.S)
    (block,) = [b for b in blocks if marker in b]
    return [(path, json.loads(body)) for path, body in re.findall(r"-X POST \$GW(/\S+) .*?-d '(.*?)'", block, re.S)]


def test_the_template_example_creates_version_1_and_its_job_is_accepted_with_the_override(api, enqueued):
    local = builders.make_cluster("local")
    builders.make_queue("default", clusters=[local], allowed_namespaces=["default"])
    (template_path, template), (job_path, job) = readme_bodies('"name": "ddp"')
    assert (template_path, job_path) == ("/api/v1/templates/", "/api/v1/jobs/")
    r = api.post(template_path, template, format="json")
    assert r.status_code == 201, r.data
    assert r.data["latest_version"] == 1
    r = api.post(job_path, job, format="json")
    assert r.status_code == 201, r.data
    assert r.data["warnings"] == []
    created = GangJob.objects.get(pk=r.data["id"])
    assert (created.template_version.template.name, created.resolved_spec["podSets"][0]["replicas"]) == ("ddp", 4)
