"""`Prefer: return=minimal` (RFC 7240) on bulk submit: each job comes back as {id, uid, name}; everything else
about the submit (rows, history, audit) is unchanged, and without the preference the answer is the full list form."""
import pytest
from rest_framework.test import APIRequestFactory

from scheduling.api.preferences import wants_minimal
from scheduling.models import AuditEvent, GangJob, PhaseTransition
from tests import builders

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(("header", "minimal"), [
    (None, False),
    ("return=minimal", True),
    ('RETURN="Minimal"', True),
    ("respond-async, return=minimal; foo=bar", True),
    ("return=representation", False),
    ("handling=lenient", False),
    ("return=minimalist", False),
    ("return=representation, return=minimal", False),  # given twice: the first counts (RFC 7240 §2)
    ("return=minimal, return=representation", True),
])
def test_the_prefer_header_is_read_as_rfc_7240_says(header, minimal):
    extra = {"HTTP_PREFER": header} if header else {}
    assert wants_minimal(APIRequestFactory().post("/", **extra)) is minimal


def test_a_bulk_submit_with_return_minimal_answers_ids_and_still_writes_everything(api, setup):
    bodies = [builders.submit_body(*setup) for _ in range(3)]
    r = api.post("/api/v1/jobs/bulk/", {"jobs": bodies}, format="json", HTTP_PREFER="return=minimal")
    assert r.status_code == 201
    assert r["Preference-Applied"] == "return=minimal"
    assert "Prefer" in r["Vary"]
    jobs = GangJob.objects.order_by("id")
    assert r.data == {"count": 3, "jobs": [{"id": j.id, "uid": str(j.uid), "name": j.name} for j in jobs]}
    assert [j.name for j in jobs] == [b["name"] for b in bodies]
    assert PhaseTransition.objects.filter(phase="Submitted").count() == 3
    assert AuditEvent.objects.filter(action="job.submit").count() == 3


def test_a_bulk_submit_without_the_preference_answers_the_full_list_form(api, setup):
    r = api.post("/api/v1/jobs/bulk/", {"jobs": [builders.submit_body(*setup)]}, format="json",
                 HTTP_PREFER="return=representation")
    assert r.status_code == 201
    assert "Preference-Applied" not in r
    assert r.data["jobs"][0]["queue"] == setup[1].name and r.data["jobs"][0]["phase"] == "Submitted"


def test_the_schema_documents_the_prefer_header_and_both_answers(api):
    schema = api.get("/api/schema/?format=json").json()
    operation = schema["paths"]["/api/v1/jobs/bulk/"]["post"]
    params = {p["name"]: p for p in operation["parameters"]}
    assert params["Prefer"]["in"] == "header"
    assert {s["$ref"].rsplit("/", 1)[1] for s in schema["components"]["schemas"]["BulkSubmitResponse"]["oneOf"]} == {
        "BulkSubmitResult", "BulkSubmitMinimalResult"}
