"""The dashboard forms give the API's messages, on the field they name, and create nothing on error."""
import pytest
from django.core.exceptions import ValidationError

from scheduling.forms.errors import apply_errors
from scheduling.forms.jobs import SubmitForm
from scheduling.forms.specs import parse_yaml_or_json
from scheduling.models import GangJob
from tests import builders


class _Form:
    def __init__(self, names):
        self.fields = dict.fromkeys(names)
        self.errors = {}

    def add_error(self, field, message):
        self.errors.setdefault(field, []).append(message)


def test_error_paths_go_to_the_longest_matching_field_and_keep_the_rest_of_the_path():
    form = _Form(["name", "spec"])
    apply_errors(form, ValidationError({"spec.podSets[1].name": "duplicate pod set name 'worker'", "name": "bad",
                                        "other": "x"}))
    assert form.errors == {"spec": ["podSets[1].name: duplicate pod set name 'worker'"], "name": ["bad"],
                           None: ["other: x"]}


def test_yaml_errors_name_line_and_column():
    with pytest.raises(ValidationError) as exc:
        parse_yaml_or_json("a: [1, 2\nb: 3", "spec")
    assert "is not valid YAML or JSON at line 2" in exc.value.message_dict["spec"][0]


def test_submit_form_and_api_give_the_same_message_for_a_bad_override(api, setup, admin_user):
    template, queue, cluster = setup
    body = builders.submit_body(template, queue, cluster, name="bad",
                                overrides={"podSets": {"worker": {"replicas": 0}}})
    api_errors = api.post("/api/v1/jobs/", body, format="json").json()
    assert api_errors == {"overrides.podSets.worker.replicas": ["must be at least 1, got 0"]}

    form = SubmitForm({"template": "llm", "name": "bad", "namespace": "default", "queue": "team-a",
                       "cluster": "local", "ov_0": "0"}, version=template, templates=["llm"], queues=["team-a"],
                      clusters=["local"])
    assert form.inputs[0].dotted == "overrides.podSets.worker.replicas"
    assert form.is_valid()
    assert form.submit(admin_user) is None
    assert form.errors == {"ov_0": ["must be at least 1, got 0"]}
    assert not GangJob.objects.filter(name="bad").exists()


def test_submit_form_sends_typed_inputs_and_merges_the_yaml_textarea(setup, admin_user, enqueued):
    template, queue, cluster = setup
    form = SubmitForm({"template": "llm", "name": "ok-1", "namespace": "default", "queue": "team-a",
                       "cluster": "local", "ov_0": "3", "ov_2": "2Gi",
                       "overrides_extra": "podSets:\n  worker:\n    replicas: 9\n"},
                      version=template, templates=["llm"], queues=["team-a"], clusters=["local"])
    # The template allows replicas and resources, not the image: no input is offered for it.
    assert [i.path for i in form.inputs] == [("podSets", "worker", "replicas"),
                                             ("podSets", "worker", "resources", "cpu"),
                                             ("podSets", "worker", "resources", "memory")]
    assert form.is_valid()
    assert form.body()["overrides"] == {"podSets": {"worker": {"replicas": 3, "resources": {"memory": "2Gi"}}}}
    job = form.submit(admin_user)
    assert job.resolved_spec["podSets"][0]["replicas"] == 3
    assert enqueued == [[job.pk]]


@pytest.mark.parametrize("field, value", [
    ("gpu_limit", "lots"),
    ("cpu_quota", "1.5.3"),
    ("name", "Team_A"),
])
def test_queue_form_and_api_give_the_same_message(api, ui, setup, field, value):
    body = {"name": "team-x", "gpu_quota": "0", "gpu_limit": "-1", field: value}
    api_errors = api.post("/api/v1/queues/", body, format="json").json()
    form = {"name": "team-x", "priority": "100", "parent": "", **{f"{r}_{k}": d for r in ("gpu", "cpu", "memory")
                                                                  for k, d in (("quota", "0"), ("limit", "-1"),
                                                                               ("over_quota_weight", "1"))}}
    form[field] = value
    page_errors = ui.post("/queues/new/", form).context["form"].errors
    assert page_errors == {field: api_errors[field]}


def test_sorting_by_time_in_phase_puts_the_longest_first_when_descending(ui, setup, admin_user):
    from datetime import timedelta

    from django.utils import timezone

    template, queue, cluster = setup
    for name, minutes in (("short", 1), ("long", 60)):
        job = builders.make_job(template, queue, cluster, name=name, phase="Queued", user=admin_user)
        GangJob.objects.filter(pk=job.pk).update(phase_changed_at=timezone.now() - timedelta(minutes=minutes))
    assert [j.name for j in ui.get("/jobs/?sort=-in_phase").context["page"].object_list] == ["long", "short"]
    assert [j.name for j in ui.get("/jobs/?sort=in_phase").context["page"].object_list] == ["short", "long"]
