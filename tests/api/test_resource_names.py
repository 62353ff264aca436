"""A resources map's names must be what the API server accepts (qualified names), so a job that the cluster would
refuse at pod creation is refused at submit with the entry named, and nothing odd is echoed into warnings."""
import pytest

from scheduling.models import GangJob
from tests import builders

pytestmark = pytest.mark.django_db


def body_asking_for(resource: str) -> dict:
    """A submit body (a queue and template of its own on cluster `local`) whose worker asks for 1 of `resource`."""
    cluster = builders.make_cluster("local")
    queue = builders.make_queue("team-a", clusters=[cluster])
    template = builders.make_template("wl")
    return builders.submit_body(template, queue, cluster, name="j",
                                overrides={"podSets": {"worker": {"resources": {resource: "1"}}}})


@pytest.mark.parametrize("name", ["<img src=x onerror=alert(1)>", "example.com/fp ga", "example.com/fpga\nX",
                                  "a" * 300, "example.com/"])
def test_a_resource_name_the_api_server_refuses_is_a_400_naming_the_entry(api, enqueued, queue_syncs, name):
    r = api.post("/api/v1/jobs/", body_asking_for(name), format="json")
    assert r.status_code == 400, r.data
    [(field, [message])] = r.data.items()
    assert field == "overrides.podSets.worker.resources"
    assert "is not a valid resource name" in message
    assert not GangJob.objects.exists()


@pytest.mark.parametrize("name", ["cpu", "nvidia.com/gpu", "example.com/fpga", "hugepages-2Mi"])
def test_valid_resource_names_pass(api, enqueued, queue_syncs, name):
    r = api.post("/api/v1/jobs/", body_asking_for(name), format="json")
    assert r.status_code == 201, r.data
