"""KAI v0.15-v0.17 CRDs reject `minMember: 0`, and v0.17 adds the PodGroup durations `preemptionDelay` and
`stalenessGracePeriod`: through the API, a template or job whose KAI gang minimum would be 0, or a malformed
duration, is a 400 naming the field and nothing is created (never a create the CRD refuses, retried for ever)."""
import pytest

from scheduling.models import GangJob, RuntimeTemplate
from tests import builders

pytestmark = pytest.mark.django_db


def kai_template(name="kai-t", **gang):
    spec = builders.template_spec(backend="kai", pod_sets=[builders.pod_set("worker", replicas=2)],
                                  overridable=["minMember", "podSets.*.replicas"])
    spec["gang"].update(gang)
    return {"name": name, "queue": "team-a", "spec": spec}


@pytest.mark.parametrize("gang, field", [
    ({"minMember": 0}, "spec.gang.minMember"),
    ({"preemptionDelay": "five minutes"}, "spec.gang.preemptionDelay"),
    ({"preemptionDelay": "-1m"}, "spec.gang.preemptionDelay"),
    ({"stalenessGracePeriod": "1 hour"}, "spec.gang.stalenessGracePeriod"),
    ({"stalenessGracePeriod": 60}, "spec.gang.stalenessGracePeriod"),
])
def test_a_kai_template_with_a_zero_minimum_or_a_malformed_duration_is_refused(api, setup, gang, field):
    refused = api.post("/api/v1/templates/", kai_template(**gang), format="json")
    assert refused.status_code == 400, refused.data
    assert field in refused.data, refused.data
    assert not RuntimeTemplate.objects.filter(name="kai-t").exists()


def test_a_kai_template_with_durations_is_accepted_as_written(api, setup):
    created = api.post("/api/v1/templates/", kai_template(preemptionDelay="5m", stalenessGracePeriod="-1s"),
                       format="json")
    assert created.status_code == 201, created.data
    gang = RuntimeTemplate.objects.get(name="kai-t").versions.get().spec["gang"]
    assert (gang["preemptionDelay"], gang["stalenessGracePeriod"]) == ("5m", "-1s")


@pytest.mark.parametrize("overrides, field", [
    ({"minMember": 0}, "overrides.minMember"),
    ({"podSets": {"worker": {"replicas": 0}}}, "overrides.podSets.worker.replicas"),
])
def test_a_kai_job_whose_gang_minimum_would_be_zero_is_refused(api, setup, overrides, field):
    template, queue, cluster = setup
    assert api.post("/api/v1/templates/", kai_template(), format="json").status_code == 201
    body = {"name": "train", "namespace": "default", "template": "kai-t", "queue": queue.name,
            "cluster": cluster.name, "overrides": overrides}
    refused = api.post("/api/v1/jobs/", body, format="json")
    assert refused.status_code == 400, refused.data
    assert field in refused.data, refused.data
    assert not GangJob.objects.filter(name="train").exists()
