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
